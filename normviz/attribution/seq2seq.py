"""Prediction attribution on the decoder of an encoder–decoder (Marian, BART: post-LN; mBART, M2M100: pre-LN).

Decoder row r (fed t_r) predicts the next target token. ``predict``/``logit_lens`` read the decoder stack's
records (its final hidden state is kept from the one pass). ``explain``:

- direct parts (pre-LN decoders): as for decoder-only models, plus the cross blocks
  ``cross_heads`` [L, H, n_src] = β^{l,h}_rj ⟨N(g^{l,h}(e_j)), u⟩ (e the encoder's output) and ``cross_bias`` [L];
  ``ff`` [L] is the FF block's output at r (x^{l+1}_r minus the cross residual).
- ``sources`` over source tokens, then target tokens: the encoder's parts of e (propagated through the encoder
  with the same rules) enter every cross block through its values; every decoder token starts as its embedding
  output; one bias part takes every bias of both stacks. Σ sources + bias = total. Computed by one backward
  pass (:func:`backward`: the decoder, each cross block's adjoint summed at e, then the encoder;
  :mod:`normviz.attribution.adjoint`); :func:`output_parts`, the forward propagation, is the tests' reference.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ..methods import decompx
from ..methods.base import Request
from ..models.params import _norm_params, _upcast_norm, get_path
from ..record.encdec.params import cross_params, decoder_view
from ..record.encdec.record import CrossRecord
from . import adjoint, direct_fields, explanation, frozen, propagate, target
from .readout import readout_of
from .result import Explanation


@dataclass
class CrossParts:
    """The cross block of one decoder layer for :func:`normviz.methods.decompx.propagate` (``cross=``)."""

    values: torch.Tensor  # [H, n_src, M·dh]: the encoder output's parts through W^V
    alpha: torch.Tensor  # [H, m, n_src]
    params: object  # CrossParams
    bias: torch.Tensor  # b^V W^O + b^O
    norm: object  # NormParams: post-LN the norm after the cross residual; pre-LN the FF's input norm
    z: torch.Tensor  # [m, d] that norm's real input
    z_ff: torch.Tensor | None  # post-LN: the real input of the norm after the FF residual
    m: int  # number of parts

    def parts(self, rows: slice) -> torch.Tensor:
        p = self.params
        out = decompx.mix_values(self.alpha, self.values, p.w_o, p.n_heads, p.n_heads, p.head_dim, rows, self.m)
        out[:, -1] += self.bias
        return out


def working_cross(ctx, rec: CrossRecord, params):
    """(the cross block's record, its weights) in the decoder layer's working dtype ``ctx.dtype``: a
    bfloat16/float16 model's block upcast to float32 per layer, as its self-attention records and weights are
    (:class:`~normviz.record.decompose.LayerDecomposition`); unchanged otherwise."""
    dt, dev = ctx.dtype, ctx.device
    if rec.z.dtype != dt:
        rec = CrossRecord(**{f.name: getattr(rec, f.name).to(device=dev, dtype=dt) for f in dataclasses.fields(rec)})
    if params.w_o.dtype != dt:
        params = dataclasses.replace(
            params,
            **{
                k: None if getattr(params, k) is None else getattr(params, k).to(dt)
                for k in ("w_v", "b_v", "w_o", "b_o")
            },
        )
    return rec, params


def _working_norm(norm, dtype):
    """A norm in ``dtype`` (a half-precision module upcast copy)."""
    return norm if norm.weight.dtype == dtype else _upcast_norm(norm, dtype)


def _cross_norms(ctx, rec, lm):
    """(the norm after the cross residual (post-LN) or the FF's input norm (pre-LN), and, post-LN, the real
    input of the norm after the FF residual: c + FF(c), or None)."""
    dec_spec = lm.spec.decoder
    layer = decoder_view(lm).layers[ctx.index]
    norm = _working_norm(_norm_params(get_path(layer, lm.spec.cross.norm_on_residual), dec_spec.norm_kind), ctx.dtype)
    z_ff = None
    if dec_spec.placement == "post":  # the real input of the norm after the FF residual: c + FF(c)
        p = ctx.p
        c = norm.module(rec.z)
        h = c @ p.w_in + (p.b_in if p.b_in is not None else 0)
        z_ff = c + p.act(h) @ p.w_out + (p.b_out if p.b_out is not None else 0)
    return norm, z_ff


def _cross_parts(ctx, rec, params, E: torch.Tensor, lm) -> CrossParts:
    """``E`` [n_src, M, d]: the parts of the encoder output e over all M parts."""
    n_src, M, d = E.shape
    H, dh = params.n_heads, params.head_dim
    values = (E.reshape(n_src * M, d) @ params.w_v).view(n_src, M, H, dh).permute(2, 0, 1, 3).reshape(H, n_src, M * dh)
    bias = params.b_o if params.b_o is not None else torch.zeros(d, dtype=E.dtype, device=E.device)
    if params.b_v is not None:
        bias = bias + params.b_v @ params.w_o
    norm, z_ff = _cross_norms(ctx, rec, lm)
    return CrossParts(
        values=values, alpha=rec.attn.to(E.dtype), params=params, bias=bias, norm=norm, z=rec.z, z_ff=z_ff, m=M
    )


def output_parts(session) -> torch.Tensor:
    """The decoder's last layer output parts [m, n_src + m + 1, d] (source tokens, target tokens, bias)."""
    lm = session.lm
    enc_views = session.layers("encoder")
    E0 = propagate.output_parts(enc_views)  # [n_src, n_src + 1, d]
    norm = _encoder_norm(lm, enc_views[-1].dtype)
    if norm is not None:  # pre-LN encoders end with a norm: e = N(x^L), its real scale, β to the bias part
        decompx.norm_parts(E0, norm, enc_views[-1].rec.out, slice(0, E0.shape[0]), decompx.BIAS_PART)
    dec_views = session.layers("decoder")
    rec = session.records()
    n_src = E0.shape[0]
    m, d = dec_views[0].rec.x.shape
    M = n_src + m + 1
    E = torch.zeros(n_src, M, d, dtype=E0.dtype, device=E0.device)
    E[:, :n_src], E[:, -1] = E0[:, :n_src], E0[:, -1]
    del E0
    X = torch.zeros(m, M, d, dtype=E.dtype, device=E.device)
    X[torch.arange(m), n_src + torch.arange(m)] = dec_views[0].rec.x
    for l, ctx in enumerate(dec_views):
        cross = _cross_parts(ctx, *working_cross(ctx, rec.cross[l], cross_params(lm, l)), E, lm)
        decompx.propagate(ctx, X, first=False, rules=decompx.BIAS_PART, cross=cross)
        ctx.clear()
    return X


def cross_adjoints(session) -> list[adjoint.CrossAdjoint]:
    """Each decoder layer's cross block, frozen at the recorded pass, for the backward pass."""
    lm, rec = session.lm, session.records()
    out = []
    for l, ctx in enumerate(session.layers("decoder")):
        cross, params = working_cross(ctx, rec.cross[l], cross_params(lm, l))
        norm, z_ff = _cross_norms(ctx, cross, lm)
        out.append(adjoint.CrossAdjoint(alpha=cross.attn, params=params, norm=norm, z=cross.z, z_ff=z_ff))
    return out


def _encoder_norm(lm, dtype):
    """The encoder's final norm (pre-LN encoders) in ``dtype``, or None."""
    if not lm.spec.final_norm:
        return None
    return _working_norm(_norm_params(get_path(lm.model.get_encoder(), lm.spec.final_norm), lm.spec.norm_kind), dtype)


def backward(session, readout, t) -> adjoint.Backward:
    """The decoder row's logit (difference) split over source + target tokens by one backward pass: through
    the decoder, its cross blocks' adjoints summed at the encoder output e, then (e = N(x^L), its β a bias)
    through the encoder. ``by_layer`` over the decoder's layers (source columns: ⟨Σ_{l' ≥ l} g_e^{l'}, e_j⟩)."""
    lm = session.lm
    shared = frozen(session)
    dec_views = session.layers("decoder")
    crosses = cross_adjoints(session)
    g, top, const = adjoint.output_adjoint(readout, t, dec_views[-1])
    _, rows, biases, g_es = adjoint.stack_adjoint(dec_views, g, shared, "decoder", crosses)
    e = session.records().memory
    e = e.reshape(-1, e.shape[-1]).to(torch.float64)
    per_layer = torch.stack([adjoint._row(ge, e) for ge in g_es])  # [L, n_src]: each cross block's read of e
    above = per_layer.flip(0).cumsum(0).flip(0)  # Σ over layers ≥ l
    by_layer = torch.cat(
        [torch.cat([above, rows], 1), torch.cat([torch.zeros(1, above.shape[1], dtype=torch.float64), top[None]], 1)]
    )
    enc_views = session.layers("encoder")
    g_e = sum(ge.to(torch.float64) for ge in g_es)
    enc_bias = 0.0
    norm = _encoder_norm(lm, enc_views[-1].dtype)
    if norm is not None:  # e = N(x^L): β is a bias, its linear part transposed
        enc_bias += adjoint._dot(g_e, norm.bias)
        g_e = adjoint.norm_adjoint(norm, g_e, enc_views[-1].rec.out.to(torch.float64))
    g_e = g_e.to(device=enc_views[-1].device, dtype=enc_views[-1].dtype)
    _, enc_rows, enc_biases, _ = adjoint.stack_adjoint(enc_views, g_e, shared, "encoder")
    return adjoint.Backward(
        sources=torch.cat([enc_rows[0], rows[0]]),
        by_layer=by_layer,
        bias_by_layer=torch.cat([biases, torch.tensor([const], dtype=torch.float64)]),
        encoder_bias=enc_bias + float(enc_biases.sum()),
    )


def _check_activations(lm) -> None:
    """Refuse (NotApplicableError) FF activations the integrated-gradients split does not cover (gated units
    other than SiLU, GELU and GELU-tanh, :func:`normviz.core.activations.gate_kind`)."""
    from ..core.activations import check_activation
    from ..core.errors import NotApplicableError

    for view in (lm, decoder_view(lm)):
        reason = check_activation(view.layer_params(0).act, gated=view.spec.ff_kind == "gated")
        if reason:
            raise NotApplicableError(f"sources: {reason}; the direct parts still apply.")


def sources_request(session) -> Request:
    """The cost of the two stacks as one request (the decoder's parts run over source + target tokens)."""
    enc, dec = session.request_of("encoder"), session.request_of("decoder")
    n = enc.n_tokens + dec.n_tokens
    return Request(**{**dec.__dict__, "n_tokens": n, "n_layers": enc.n_layers + dec.n_layers})


@torch.no_grad()
def explain(session, token=None, foil=None, position: int = -1) -> Explanation:
    """:func:`normviz.attribution.explain` on decoder row ``position`` of an encoder–decoder's Session."""
    lm = session.lm
    dec = decoder_view(lm)
    readout = readout_of(dec)
    views = session.layers("decoder")
    rec = session.records()
    t = target(lm, readout, views, token, foil, position)
    crosses = [working_cross(ctx, rec.cross[l], cross_params(lm, l)) for l, ctx in enumerate(views)]
    direct, refusal = direct_fields(dec, readout, views, t, crosses=crosses)
    request, options, itemsize = sources_request(session), dict(session.options), views[0].rec.x.element_size()

    def sources():
        adjoint.check(request, options, itemsize)
        _check_activations(lm)
        with session.store.lock:
            return backward(session, readout, t)

    src, tgt = list(session.src_tokens), list(session.tgt_tokens)
    return explanation(lm, t, tgt, direct, refusal, sources, source_tokens=src + tgt, n_source=len(src))

"""The readout of a stack: how its last residual state x^L_i becomes logits, and the same map applied to parts.

    pre-LN decoders   logits = W_U · N(x^L_i) + b_U        N the final norm (GPT-2 ln_f, Llama norm, mBART's)
    post-LN decoders  logits = W_U · x^L_i + b_U           (Marian, BART: no final norm)
    BERT MLM head     logits = W_U · LN(g(x^L_i W_t + b_t)) + b_U

(b_U: the LM head's bias plus a seq2seq model's ``final_logits_bias``.) The norms have a real scale fixed by
the model's own vector at i: N(c) = γ⊙c / rms(x^L_i) (RMSNorm) or γ⊙(c − mean c) / σ(x^L_i) (LayerNorm), so
for a linear readout the contribution of any vector c to the logit difference of token w over foil f is
⟨N(c), u⟩ = ⟨c, r⟩ with u = W_U[w] − W_U[f] and r the **readout vector** (:meth:`Readout.vector`); β and b_U
give a constant (:meth:`Readout.constant`). The MLM head's activation is split like the FF's (integrated
gradients from zero: part × g(h)/h at the real pre-activation, :meth:`Readout.project_parts`).

Half-precision (bfloat16/float16) models are read out in float32 as the maps are (DESIGN.md "Long inputs"):
their records come upcast per layer, the final norm and an MLM transform are upcast copies, and W_U is upcast
a vocabulary chunk at a time (at most ``CHUNK_BYTES`` extra), never as a whole float32 copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.activations import activation_ratio
from ..core.errors import NormvizError
from ..models.params import NormParams, _norm_params, _upcast_norm, get_path
from ..record.decompose import HALF, working_dtype

CHUNK_BYTES = 32 * 2**20  # one upcast slice of W_U (half-precision models)


class NoHeadError(NormvizError):
    """The model was loaded without a language-model head, so it predicts nothing."""


@dataclass
class Readout:
    head: torch.nn.Module  # the model's own module: final hidden state [.., d] → logits (without final_logits_bias)
    w_u: torch.Tensor  # [V, d], rows of the output embeddings
    b_u: torch.Tensor | None  # [V]: the head's bias + final_logits_bias
    extra_bias: torch.Tensor | None  # [V] final_logits_bias (added after ``head``)
    norm: NormParams | None  # the final norm, when the stack has one
    transform: tuple[torch.nn.Module, object, NormParams] | None  # an MLM head's dense, activation, LayerNorm
    scale: float = 1.0  # the head reads final · scale (T5 with scale_decoder_outputs: d_model**-0.5; Granite, Cohere)
    softcap: float | None = None  # logits = c·tanh(z / c) (Gemma 2's final_logit_softcapping)

    @property
    def vocab_size(self) -> int:
        return int(self.w_u.shape[0])

    @property
    def linear(self) -> bool:
        """The logit is linear in x^L_i once the norm's scale is frozen (no MLM transform)."""
        return self.transform is None

    # ---- the model's own numbers
    def logits(self, final: torch.Tensor) -> torch.Tensor:
        """Logits from final hidden states [m, d] (the stack's output, after its final norm), by the model's own
        head modules (and its final soft-cap)."""
        return self.cap(self.uncapped(final))

    def uncapped(self, final: torch.Tensor) -> torch.Tensor:
        """The logits before a final soft-cap (the logits themselves without one)."""
        x = final * self.scale if self.scale != 1.0 else final
        if x.dtype != self.w_u.dtype:  # half-precision weights, states in the working dtype
            return self._upcast_logits(x)
        out = self.head(x)
        return out + self.extra_bias if self.extra_bias is not None else out

    def cap(self, z: torch.Tensor) -> torch.Tensor:
        """The final soft-cap c·tanh(z / c) of the logits z, or z."""
        return z if self.softcap is None else self.softcap * torch.tanh(z / self.softcap)

    def cap_factor(self, z: float) -> float:
        """θ = c·tanh(z / c) / z: the capped logit is θ times the uncapped one, so each part of z times θ is
        its part of the capped logit (integrated gradients of the scalar tanh from zero, exact: the tanh as one
        more factor); 1 without a soft-cap (limit 1 at z = 0)."""
        import math

        if self.softcap is None or z == 0:
            return 1.0
        return self.softcap * math.tanh(z / self.softcap) / z

    def _upcast_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The head's formula in x's dtype: (MLM: LN(g(x W_t + b_t))) · W_Uᵀ + b_U, W_U upcast in row chunks."""
        if self.transform is not None:
            dense, act, norm = self.transform  # upcast copies (readout_of)
            x = norm.module(act(dense(x)))
        w = self.w_u
        out = torch.empty(*x.shape[:-1], w.shape[0], dtype=x.dtype, device=x.device)
        step = max(1, CHUNK_BYTES // (w.shape[1] * x.element_size()))
        for k in range(0, w.shape[0], step):
            out[..., k : k + step] = x @ w[k : k + step].to(device=x.device, dtype=x.dtype).T
        return out + self.b_u.to(device=x.device, dtype=x.dtype) if self.b_u is not None else out

    def from_residual(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of residual states [m, d] through the final norm (the model's module) and the head."""
        return self.logits(self.norm.module(x) if self.norm is not None else x)

    # ---- the direction of a (contrastive) logit
    def direction(self, token: int, foil: int | None, raw: torch.Tensor | None = None) -> tuple[torch.Tensor, float]:
        """(u = W_U[w] − W_U[f] (or W_U[w]) [d], b_U[w] − b_U[f] (or b_U[w])); u times the head's input scale.
        With a final soft-cap, each row times its θ at the uncapped logits ``raw`` (:meth:`cap_factor`): u and
        b then give the capped logit (difference) exactly."""
        work = working_dtype(self.w_u.dtype)  # half-precision rows upcast before they are subtracted
        tw = self.cap_factor(float(raw[token])) if self.softcap is not None else 1.0
        tf = self.cap_factor(float(raw[foil])) if self.softcap is not None and foil is not None else 1.0
        u = (self.w_u[token].to(work) * tw - (self.w_u[foil].to(work) * tf if foil is not None else 0)) * self.scale
        b = 0.0
        if self.b_u is not None:
            b = float(self.b_u[token]) * tw - (float(self.b_u[foil]) * tf if foil is not None else 0.0)
        return u, b

    def vector(self, u: torch.Tensor, x_last: torch.Tensor) -> torch.Tensor:
        """r with ⟨N(c), u⟩ = ⟨c, r⟩ for every c (linear readouts): γ⊙u/rms(x^L_i), or for LayerNorm
        (γ⊙u − mean(γ⊙u))/σ(x^L_i) (centring is self-adjoint)."""
        if self.transform is not None:
            raise NotImplementedError("an MLM head's transform is not linear; use project_parts")
        if self.norm is None:
            return u
        r = u * self.norm.weight
        if self.norm.kind == "layernorm":
            r = r - r.mean()
        return r / self.norm.scale(x_last)

    def constant(self, u: torch.Tensor, b: float) -> float:
        """⟨β, u⟩ of the final norm plus the head's bias difference: the readout's own part of the logit."""
        beta = self.norm.bias if self.norm is not None else None
        return b + (float(beta.to(u.dtype) @ u) if beta is not None else 0.0)

    def project_parts(self, parts: torch.Tensor, x_last: torch.Tensor, u: torch.Tensor, b: float) -> torch.Tensor:
        """Each part's share of the logit (difference) [m], for parts [m, d] of x^L_i whose LAST row is the bias
        part (it also takes every bias of the readout): Σ = the logit (difference) at i exactly."""
        acc = parts.dtype
        if self.transform is None:
            out = parts @ self.vector(u.to(acc), x_last.to(acc))
            out[-1] += self.constant(u.to(acc), b)
            return out
        dense, act, norm = self.transform
        w = dense.weight.T.to(acc)
        h = parts @ w
        real = x_last.to(acc) @ w
        if dense.bias is not None:
            h[-1] += dense.bias.to(acc)
            real = real + dense.bias.to(acc)
        h = h * activation_ratio(act, real)  # integrated gradients from zero, per unit
        g = act(real)
        if norm.kind == "layernorm":
            h = h - h.mean(-1, keepdim=True)
        h = h * (norm.weight.to(acc) / norm.scale(g))
        out = h @ u.to(acc)
        out[-1] += b + (float(norm.bias.to(acc) @ u.to(acc)) if norm.bias is not None else 0.0)
        return out


def stack_view(session):
    """(the LoadedModel view whose predictions are explained, the name of its stack for ``session.layers``):
    the model's one stack (None: the default), or an encoder–decoder's decoder. Records nothing."""
    if getattr(session, "is_encoder_decoder", False):
        from ..record.encdec.params import decoder_view

        return decoder_view(session.lm), "decoder"
    return session.lm, None


def readout_of(lm) -> Readout:
    """The readout of ``lm`` (a LoadedModel; an encoder–decoder's decoder view for its decoder). Raises
    :class:`NoHeadError` when the model was loaded without an LM head."""
    head_model = getattr(lm, "head_model", None)
    spec = lm.spec
    if head_model is None or not spec.lm_head:
        raise NoHeadError(
            f"{lm.name!r} was loaded without a language-model head, so it predicts no tokens (a sentence encoder "
            "such as minilm has none; normviz reads the heads of GPT-2, the Llama family, BERT saved as "
            "BertForMaskedLM and the encoder–decoders). Use a model with one: 'smollm2' (a decoder) or 'toy-mt'."
        )
    head = get_path(head_model, spec.lm_head)
    out_emb = head_model.get_output_embeddings()
    half = out_emb.weight.dtype in HALF  # read out in float32: the small modules upcast, W_U chunk by chunk
    up = (lambda t: t.float()) if half else (lambda t: t)  # noqa: E731
    extra = getattr(head_model, "final_logits_bias", None)
    extra = up(extra.reshape(-1)) if extra is not None else None
    b_u = up(out_emb.bias) if getattr(out_emb, "bias", None) is not None else None
    if extra is not None:
        b_u = extra if b_u is None else b_u + extra
    root = lm.model
    if getattr(lm, "stack", "model") == "decoder":
        root = root.get_decoder()
    norm = _norm_params(get_path(root, spec.final_norm), spec.norm_kind, spec.norm) if spec.final_norm else None
    transform = None
    if spec.head_transform:
        dense, act, ln = (get_path(head_model, path) for path in spec.head_transform)
        transform = (dense, act, _norm_params(ln, "layernorm"))
    if half:
        import copy

        norm = _upcast_norm(norm, torch.float32)
        if transform is not None:
            dense, act, ln = transform
            transform = (copy.deepcopy(dense).float(), act, _upcast_norm(ln, torch.float32))
    scale = 1.0
    if spec.head_scale_flag and getattr(lm.config, spec.head_scale_flag, False):
        scale = float(head_model.config.d_model) ** -0.5
    rs, config = spec.readout, head_model.config
    if rs.divide_by and getattr(config, rs.divide_by, None):
        scale /= float(getattr(config, rs.divide_by))
    if rs.multiply_by and getattr(config, rs.multiply_by, None) is not None:
        scale *= float(getattr(config, rs.multiply_by))
    cap = getattr(config, rs.softcap, None) if rs.softcap else None
    return Readout(
        head=head,
        w_u=out_emb.weight,
        b_u=b_u,
        extra_bias=extra,
        norm=norm,
        transform=transform,
        scale=scale,
        softcap=float(cap) if cap else None,
    )

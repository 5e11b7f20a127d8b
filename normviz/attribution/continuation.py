"""Explain a whole continuation: where every generated (or given) token came from, exactly, in one batched pass.

    s.explain_continuation(max_new_tokens=T)                 greedy, as transformers' generate(do_sample=False)
    s.explain_continuation(continuation=" the answer")       a known continuation, teacher-forced
    s.explain_continuation(T, foil="runner-up")              each step against its best other token

Step t of a decoder's continuation of an n-token prompt is the next-token logit at position i_t = n − 1 + t
of prompt + continuation (the step's own token is the input of step t + 1). A causal model's row i depends only
on the tokens ≤ i, so ONE recording pass over the n + T − 1 tokens holds every step's frozen coefficients (α,
the norms' real scales, the FF's integrated-gradient factors) exactly as a one-position ``explain`` of that
prefix would (the tests compare them). The adjoint of the frozen-coefficient network is linear in its target
(:mod:`normviz.attribution.adjoint`), so the T readout vectors go backwards together as one batch g [T, n, d]:
one pass through the layers whose matrix products take all T targets at once (the heads' α^hᵀ on [H, n, T·dh]),
the FF factors computed once and shared, long inputs' α streamed in blocks of rows; targets are split into
groups only when the batch would not fit ``explain_max_bytes``.

Encoder–decoders: the steps are the decoder's rows (row r predicts target token r); each row goes over the
source tokens and the target tokens fed up to it, through the decoder, the cross blocks and the encoder.

Row t of ``sources`` + ``bias[t]`` = ``totals[t]`` (the model's own logit, or its difference to the foil);
columns after step t's position are NaN (they cannot reach it).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from ..core.errors import InputError, NormvizError, NotApplicableError
from ..core.tokens import Encoded, encoded_ids, tokenize
from ..methods import decompx
from . import adjoint, frozen
from .direct import _alpha_row, _bias
from .predict import token_id, token_text, whole_number
from .readout import readout_of

RUNNER_UP = "runner-up"
MAX_NEW_TOKENS = 512


# ---------------------------------------------------------------- the result
@dataclass
class Continuation:
    """Every step of a continuation explained. Arrays are numpy (float64 for numbers); T steps, N columns.

    generated_ids [T], tokens [T], positions [T]  each step's token, its text, the row whose next-token logit
                                                  it is (decoders: n − 1 + t; encoder–decoders: decoder row t)
    foils [T] (−1: none), foil_tokens [T]         the token each step is contrasted with (``foil``)
    totals [T]                                    the model's own logit (difference) of each step
    sources [T, N], bias [T]                      each column's exact part; row + bias = total; NaN after
                                                  the step's own position
    columns [N]                                   the column tokens: prompt + continuation[:-1] (decoders);
                                                  source tokens, then the decoder's input tokens
    heads [T, L, H], ff [T, L], attn_bias [T, L], embedding [T], final_bias [T]   the direct parts (pre-LN
                                                  stacks; None with ``direct_refusal`` otherwise): with
                                                  cross_heads/cross_bias they sum to totals
    sources_by_layer [T, L+1, N], bias_by_layer [T, L+1]   when asked for (``by_layer=True``)
    """

    model_name: str
    mode: str  # "greedy" or "given"
    generated_ids: np.ndarray
    tokens: list[str]
    positions: np.ndarray
    totals: np.ndarray
    sources: np.ndarray
    bias: np.ndarray
    columns: list[str]
    column_ids: np.ndarray
    n_prompt: int  # decoders: the prompt's tokens; encoder–decoders: the source's
    foils: np.ndarray
    foil_tokens: list[str | None]
    foil_mode: str | None  # None, "token" or "runner-up"
    text: str  # the continuation's text
    note: str
    n_source: int = 0  # encoder–decoders: the first n_source columns are source tokens
    heads: np.ndarray | None = None
    ff: np.ndarray | None = None
    attn_bias: np.ndarray | None = None
    embedding: np.ndarray | None = None
    final_bias: np.ndarray | None = None
    cross_heads: np.ndarray | None = None
    cross_bias: np.ndarray | None = None
    direct_refusal: str | None = None
    sources_by_layer: np.ndarray | None = None
    bias_by_layer: np.ndarray | None = None
    batches: int = 1  # how many batched backward passes ran (1 unless the batch did not fit)
    extra: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.generated_ids)

    @property
    def column_of_step(self) -> np.ndarray:
        """[T] the column of each step's own position (its last valid column)."""
        return self.positions + self.n_source

    def to_dict(self) -> dict:
        """Every field as numpy arrays / numbers / strings (what ``normviz explain --continue`` writes)."""
        out = {
            "model": self.model_name,
            "mode": self.mode,
            "generated_ids": self.generated_ids,
            "tokens": np.array(self.tokens),
            "positions": self.positions,
            "totals": self.totals,
            "sources": self.sources,
            "bias": self.bias,
            "columns": np.array(self.columns),
            "column_ids": self.column_ids,
            "n_prompt": self.n_prompt,
            "n_source": self.n_source,
            "text": self.text,
            "note": self.note,
        }
        if self.foil_mode is not None:
            out.update(
                foils=self.foils, foil_tokens=np.array([t or "" for t in self.foil_tokens]), foil_mode=self.foil_mode
            )
        for name in (
            "heads",
            "ff",
            "attn_bias",
            "embedding",
            "final_bias",
            "cross_heads",
            "cross_bias",
            "sources_by_layer",
            "bias_by_layer",
        ):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.direct_refusal:
            out["direct_refusal"] = self.direct_refusal
        return out

    def to_json(self) -> str:
        """JSON with NaN written as null (the columns after each step's position)."""

        def plain(v):
            if isinstance(v, np.ndarray):
                if v.dtype.kind == "f":
                    return np.where(np.isnan(v), None, v).tolist()
                return v.tolist()
            if isinstance(v, np.generic):
                return v.item()
            return v

        return json.dumps({k: plain(v) for k, v in self.to_dict().items()}, ensure_ascii=False)

    def __repr__(self) -> str:
        return f"Continuation({self.mode}, {len(self)} steps over {len(self.columns)} tokens: {self.text!r})"


# ---------------------------------------------------------------- what is continued
def _steps(max_new_tokens) -> int:
    T = whole_number(max_new_tokens, "max_new_tokens")
    if not 1 <= T <= MAX_NEW_TOKENS:
        raise InputError(f"max_new_tokens must be between 1 and {MAX_NEW_TOKENS}, got {T}.")
    return T


def _given_ids(lm, continuation, vocab_size: int, target_side: bool = False) -> list[int]:
    """A given continuation's ids: a text (tokenised without special tokens; encoder–decoders: as a target,
    with the tokenizer's own end token) or ids."""
    if isinstance(continuation, str):
        if continuation == "":
            raise InputError("The continuation is empty: give its text, or max_new_tokens to generate one.")
        tok = lm.tokenizer
        if tok is None:
            raise InputError("This model has no tokenizer: give the continuation as token ids.")
        ids = (
            tokenize(tok, text_target=continuation, add_special_tokens=True)
            if target_side
            else tokenize(tok, continuation, add_special_tokens=False)
        )["input_ids"]
    else:
        ids = [
            token_id(None, whole_number(i, "continuation id"), vocab_size, "continuation token")
            for i in list(continuation)
        ]
    if not ids:
        raise InputError("The continuation gave no tokens.")
    return [int(i) for i in ids]


@torch.no_grad()
def greedy(lm, ids: list[int], max_new_tokens: int) -> list[int]:
    """The model's own greedy continuation (``generate(do_sample=False)``, one beam, the KV cache): the new ids,
    ending early at the end-of-sequence token as ``generate`` does."""
    model = lm.head_model
    x = torch.tensor([list(ids)], device=lm.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # generation-config notices (pad token set to eos …)
        out = model.generate(
            input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens, do_sample=False, num_beams=1
        )
    return out[0, len(ids) :].tolist()


def _encoded(lm, ids: list[int]) -> Encoded:
    if lm.tokenizer is not None:
        return encoded_ids(lm.tokenizer, ids)
    return Encoded(
        ids=list(ids), tokens=[str(i) for i in ids], labels=[str(i) for i in ids], special=[False] * len(ids), dropped=0
    )


def _label(lm, i: int) -> str:
    return token_text(lm.tokenizer, i)


# ---------------------------------------------------------------- the targets
def _targets(lm, readout, views, positions, ids, foil):
    """One :class:`normviz.attribution.Target` per step: token ids[t] at row positions[t], minus the foil (a
    fixed token, the runner-up of each step, or none). A step whose token is the foil has u = 0 (total 0)."""
    from . import Target

    rows = torch.as_tensor(list(positions))
    final = views[-1].rec.final
    if final is None:
        raise NormvizError("This recording kept no final hidden state.")
    logits = readout.logits(final[rows.to(final.device)]).to(torch.float64).cpu()  # [T, V]
    fixed = None
    if foil is not None and not (isinstance(foil, str) and foil == RUNNER_UP):
        fixed = token_id(lm.tokenizer, foil, readout.vocab_size, "foil")
    out = []
    for k, (i, w) in enumerate(zip(rows.tolist(), ids)):
        f = fixed
        if isinstance(foil, str) and foil == RUNNER_UP:
            row = logits[k].clone()
            row[w] = -torch.inf
            f = int(row.argmax())
        if readout.softcap is None:
            u, b = readout.direction(w, f)
            total = float(logits[k, w] - (logits[k, f] if f is not None else 0.0))
        else:  # a final soft-cap (Gemma 2): the capped logit, each row's θ at the uncapped logits, as target()
            from . import final_state, logits_at

            raw = readout.uncapped(final_state(views, i)[None])[0].to(torch.float64)
            capped = logits_at(readout, views, i).to(torch.float64)
            u, b = readout.direction(w, f, raw)
            total = float(capped[w] - (capped[f] if f is not None else 0.0))
        out.append(Target(i=i, token=int(w), foil=f, total=total, u=u, b=b, x_last=views[-1].rec.out[i]))
    return out


# ---------------------------------------------------------------- the batched adjoint
def _row_dots(g: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[B]: Σ_i ⟨g[k, i], b_i⟩ per target for a bias b [n, d] that differs per row (:func:`adjoint._rows_dot`)."""
    return (g.to(torch.float64) * b.to(device=g.device, dtype=torch.float64)[None]).sum((1, 2)).cpu()


def _dots(g: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """[B]: Σ_i ⟨g[k, i], b⟩ per target (float64, CPU): :func:`adjoint._dot` for a batch."""
    if b is None:
        return torch.zeros(g.shape[0], dtype=torch.float64)
    return (g.sum(1).to(torch.float64) @ b.to(device=g.device, dtype=torch.float64)).cpu()


class Live:
    """The (target, row) pairs where a batch's adjoint can be nonzero: target k's own row i_k at the top of a
    causal stack, rows j ≤ i_k below its first attention block. Row-wise products (the FF, W^O, W^V) run on
    these rows only, packed [P, ·] (P = Σ_k (i_k + 1) instead of B·n): the causal structure's saving, exact."""

    def __init__(self, b: torch.Tensor, j: torch.Tensor, B: int, n: int):
        self.b, self.j, self.B, self.n = b, j, B, n

    @classmethod
    def own_rows(cls, positions, n: int, device) -> Live:
        B = len(positions)
        return cls(torch.arange(B, device=device), torch.as_tensor(list(positions), device=device), B, n)

    @classmethod
    def causal(cls, positions, n: int, device) -> Live:
        pos = torch.as_tensor(list(positions), device=device)
        mask = torch.arange(n, device=device)[None, :] <= pos[:, None]
        b, j = mask.nonzero(as_tuple=True)
        return cls(b, j, len(positions), n)

    def pack(self, g: torch.Tensor) -> torch.Tensor:
        return g[self.b, self.j]

    def unpack(self, rows: torch.Tensor) -> torch.Tensor:
        out = rows.new_zeros(self.B, self.n, rows.shape[-1])
        out[self.b, self.j] = rows
        return out

    def dots(self, rows: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """[B]: Σ over target k's rows of ⟨row, bias⟩ (float64, CPU)."""
        if bias is None:
            return torch.zeros(self.B, dtype=torch.float64)
        per = rows.new_zeros(self.B, rows.shape[-1]).index_add_(0, self.b, rows)
        return (per.to(torch.float64) @ bias.to(device=rows.device, dtype=torch.float64)).cpu()


def _ff(p, g: torch.Tensor, factors, live: Live | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`adjoint.ff_adjoint` for g [B, n, d]; the factors [n, d_ff] shared by every target (``live``: on
    its rows only)."""
    if live is not None:
        rows = live.pack(g)
        out, bias = _ff_rows(p, rows, [f[live.j] for f in factors], live.dots)
        return live.unpack(out), bias
    return _ff_rows(p, g, factors, lambda x, b: _dots(x, b))


def _ff_rows(p, g: torch.Tensor, factors, dots) -> tuple[torch.Tensor, torch.Tensor]:
    h = g @ p.w_out.T
    bias = dots(g, p.b_out)
    a = h * factors[0]
    bias += dots(a, p.b_in)
    out = a @ p.w_in.T
    del a
    if p.ff_kind != "mlp":
        b = h.mul_(factors[1])
        bias += dots(b, p.b_up)
        out += b @ p.w_up.T
    return out, bias


def _project(g: torch.Tensor, w: torch.Tensor, live: Live | None) -> torch.Tensor:
    """g [B, n, a] @ w (only on ``live``'s rows when given, the others 0)."""
    return g @ w if live is None else live.unpack(live.pack(g) @ w)


def _heads_in(g: torch.Tensor, w_o: torch.Tensor, H: int, dh: int, live: Live | None = None) -> torch.Tensor:
    """g [B, n, d] at an attention output → P [H, n, B·dh]: every target's (g W^O_hᵀ) side by side, so that
    one α^hᵀ product per head serves them all."""
    B, n, _ = g.shape
    return _project(g, w_o.T, live).view(B, n, H, dh).permute(2, 1, 0, 3).reshape(H, n, B * dh)


def _heads_out(Q: torch.Tensor, B: int) -> torch.Tensor:
    """[G, n, B·dh] → [B, n, G·dh]."""
    G, n, _ = Q.shape
    return Q.view(G, n, B, -1).permute(2, 1, 0, 3).reshape(B, n, -1)


def _attention(ctx, g: torch.Tensor, live: Live | None = None, below: Live | None = None) -> torch.Tensor:
    """:func:`adjoint.attention_adjoint` for g [B, n, d] (GQA: query heads summed per kv head); ``live``: the
    rows g may be nonzero at, ``below``: the rows the result may be nonzero at (the rows each target reads)."""
    p = ctx.p
    B, n, _ = g.shape
    H, KV, dh = p.n_heads, p.n_kv_heads, p.head_dim
    if ctx.attn_row_scale is not None:  # a norm P_a after the attention: 1/s_i at the receiving row (γ in W^O)
        g = g * ctx.attn_row_scale[None, :, None].to(device=g.device, dtype=g.dtype)
    Q = adjoint.mix_adjoint(ctx.rec, _heads_in(g, p.w_o, H, dh, live))  # [H, n, B·dh]
    if KV != H:
        Q = Q.view(KV, H // KV, n, B * dh).sum(1)
    return _project(_heads_out(Q, B), p.w_v.T, below)


def _cross(cross, g: torch.Tensor, live: Live | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """:meth:`adjoint.CrossAdjoint.adjoint` for g [B, m, d]: (g at the encoder output [B, n_src, d], biases [B])."""
    p = cross.params
    B = g.shape[0]
    bias = _dots(g, p.b_o)
    if p.b_v is not None:
        bias += _dots(g, p.b_v @ p.w_o)
    Q = adjoint.mix_adjoint(cross.alpha, _heads_in(g, p.w_o.to(g.dtype), p.n_heads, p.head_dim, live))
    return _heads_out(Q, B) @ p.w_v.to(g.dtype).T, bias


def _layer(ctx, g: torch.Tensor, factors, cross=None, live: Live | None = None, below: Live | None = None):
    """:func:`adjoint.layer_adjoint` for a batch g [B, n, d] (the same steps, each bias's part per target);
    ``live``: the rows g may be nonzero at (None: all), ``below``: the rows below the attention block."""
    p = ctx.p
    ff_norm, ff_z, z_ff = adjoint.ff_input(ctx, cross)
    norm2 = p.norm_on_ff_residual
    g_e = None
    na = adjoint.norm_adjoint
    if norm2 is not None:  # post-LN: x' = N2(ℓ + F(ℓ)), ℓ = N1(U) (cross: ℓ = Nc(N1(U) + C))
        bias = _dots(g, norm2.bias)
        g_out = na(norm2, g, z_ff)
        f, b = _ff(p, g_out, factors, live)
        g_ell = g_out + f
        bias += b
        if cross is not None:
            bias += _dots(g_ell, cross.norm.bias)
            g_ell = na(cross.norm, g_ell, cross.z)
            g_e, b = _cross(cross, g_ell, live)
            bias += b
        bias += _dots(g_ell, ctx.ln_attn.bias)
        g_u = na(ctx.ln_attn, g_ell, ctx.rec.z_attn)
        bias += _row_dots(g_u, decompx.row_bias(ctx))
        return g_u + _attention(ctx, g_u, live, below), bias, g_e
    f, bias = _ff(p, g, factors, live)  # pre-LN: x' = U + F(N2(U)), U = x + A(N1(x)) + b (+ C)
    bias += _dots(f, ff_norm.bias)
    ff_back = na(ff_norm, f, ff_z)
    del f
    g_u = g if p.parallel else g + ff_back  # a parallel block's FF reads x, not U
    if cross is not None:
        g_e, b = _cross(cross, g_u, live)
        bias += b
    bias += _row_dots(g_u, decompx.row_bias(ctx))  # each α row's own sum (float32 softmax), as layer_adjoint
    g_hat = _attention(ctx, g_u, live, below)
    n1 = p.norm_on_input
    bias += _dots(g_hat, n1.bias)
    out = g_u + na(n1, g_hat, ctx.rec.x)
    return (out + ff_back if p.parallel else out), bias, g_e


def _rows(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """[B, n]: ⟨g[k, j], x_j⟩ (float64, CPU)."""
    return (g.to(torch.float64) * x.to(device=g.device, dtype=torch.float64)).sum(-1).cpu()


def stack_backward(
    views, g: torch.Tensor, shared: adjoint.Frozen, tag: str = "", crosses=None, positions=None, by_layer=True
):
    """g [B, n, d] at a stack's output → (g at its input, rows [B, L, n], biases [B, L], per layer the cross
    block's g at the encoder output [B, n_src, d] or None). Each view is cleared after its layer.
    ``positions`` (a causal stack): each target's row i_k; the products then run on rows j ≤ i_k only.
    ``by_layer=False``: only rows[:, 0] (the sources) is computed, the layers above are left 0."""
    L = len(views)
    rows, biases, g_es = [None] * L, [None] * L, [None] * L
    live = below = None
    if positions is not None:
        n = g.shape[1]
        live, below = Live.own_rows(positions, n, g.device), Live.causal(positions, n, g.device)
    for l in range(L - 1, -1, -1):
        ctx = views[l]
        g = g.to(device=ctx.device, dtype=ctx.dtype)
        cross = crosses[l] if crosses is not None else None
        g, biases[l], g_es[l] = _layer(ctx, g, shared.factors((tag, l), ctx, cross, views), cross, live, below)
        live = below
        rows[l] = _rows(g, ctx.rec.x) if by_layer or l == 0 else torch.zeros(g.shape[:2], dtype=torch.float64)
        ctx.clear()
    return g, torch.stack(rows, 1), torch.stack(biases, 1), g_es


def output_batch(readout, targets, last):
    """(g^L [B, n, d]: δ_{i_k} r_k, the output rows [B, n], the readout's constants [B], r [B, d] float64)."""
    n, d = last.rec.x.shape
    B = len(targets)
    g = torch.zeros(B, n, d, dtype=last.dtype, device=last.device)
    top = torch.zeros(B, n, dtype=torch.float64)
    const = torch.zeros(B, dtype=torch.float64)
    rs = torch.zeros(B, d, dtype=torch.float64)
    for k, t in enumerate(targets):
        r, const[k] = adjoint.readout_adjoint(readout, t.u, t.b, t.x_last)
        rs[k] = r.cpu()
        g[k, t.i] = r.to(device=last.device, dtype=last.dtype)
        top[k, t.i] = float(r @ t.x_last.to(torch.float64))
    return g, top, const, rs


# ---------------------------------------------------------------- the direct parts, batched
def direct_batch(views, targets, rs: torch.Tensor, crosses=None) -> dict:
    """:func:`normviz.attribution.direct.direct_logits` for every step at once, each head summed over the
    tokens it reads: heads [B, L, H], attn_bias, ff [B, L], embedding [B] (cross_heads, cross_bias)."""
    acc = torch.float64
    idx = [t.i for t in targets]
    heads, attn_bias, ff, cross_heads, cross_bias = [], [], [], [], []
    for l, ctx in enumerate(views):
        R = rs.to(device=ctx.device, dtype=acc)
        w_or = torch.einsum("hed,bd->bhe", ctx.p.head_w_o().to(acc), R)  # [B, H, dh]
        values = ctx.head_values.to(acc)  # [H, n, dh]
        A = torch.stack([_alpha_row(ctx, i).to(acc) for i in idx], 1)  # [H, B, n]
        per = torch.einsum("hjd,bhd->hbj", values, w_or)  # ⟨v^h_j, W^O_h r_b⟩
        heads.append((A * per).sum(-1).T.cpu())
        attn_bias.append((R @ ctx.b_o.to(acc)).cpu())
        z = ctx.rec.z_attn[idx] if crosses is None else crosses[l][0].z[idx]
        ff.append(((ctx.rec.out[idx] - z).to(acc) * R).sum(-1).cpu())
        if crosses is not None:
            rec, params = crosses[l]
            H, dh = params.n_heads, params.head_dim
            v = rec.v.reshape(rec.v.shape[0], H, dh).transpose(0, 1).to(acc)
            c_or = torch.einsum("hed,bd->bhe", params.head_w_o().to(acc), R)
            per = torch.einsum("hjd,bhd->hbj", v, c_or)
            cross_heads.append((rec.attn[:, idx].to(acc) * per).sum(-1).T.cpu())
            cross_bias.append((R @ _bias(params.b_o, ctx).to(acc)).cpu())
        ctx.clear()
    x0 = views[0].rec.x[idx].to(acc)
    out = {
        "heads": torch.stack(heads, 1),
        "attn_bias": torch.stack(attn_bias, 1),
        "ff": torch.stack(ff, 1),
        "embedding": (x0 * rs.to(device=x0.device)).sum(-1).cpu(),
    }
    if crosses is not None:
        out["cross_heads"] = torch.stack(cross_heads, 1)
        out["cross_bias"] = torch.stack(cross_bias, 1)
    return out


# ---------------------------------------------------------------- groups of targets (bounded memory)
def group_size(request, options: dict, itemsize: int, T: int, n_src: int = 0) -> int:
    """How many targets one batched backward pass takes within ``explain_max_bytes``: per target a few
    [n, d] adjoints and the FF's [n, d_ff] products; shared the factors and one block of α."""
    n, d, d_ff = request.n_tokens + n_src, request.d_model, request.d_ff
    per = n * (8 * d + 6 * d_ff) * itemsize  # adjoints, FF products, the factors gathered at its rows
    shared = 3 * n * d_ff * 8 + adjoint.ALPHA_BLOCK_BYTES
    limit = int(options.get("explain_max_bytes", adjoint.MAX_BYTES))
    return int(max(1, min(T, (limit - shared) // max(per, 1))))


def _check(request, options, itemsize, T):
    """One target must fit (adjoint.check's message); the whole batch must fit the time budget."""
    adjoint.check(request, options, itemsize)
    adjoint.refuse_over_budget(
        request,
        "sources of a continuation",
        options,
        adjoint.BUDGET,
        lambda q: T * adjoint.flops(q),
        note="Fewer steps (max_new_tokens) or a shorter prompt fit.",
    )


# ---------------------------------------------------------------- decoders
def _decoder(session, T, continuation, foil, by_layer):
    lm = session.lm
    readout = readout_of(lm)
    prompt = list(session.encoded.ids)
    if continuation is not None:
        ids, mode = _given_ids(lm, continuation, readout.vocab_size), "given"
    else:
        ids, mode = greedy(lm, prompt, _steps(T if T is not None else 20)), "greedy"
        if not ids:
            raise NormvizError("The model generated no token (its prompt ends the text).")
    full = prompt + ids[:-1]
    window = min(
        lm.max_length,
        *(getattr(lm.config, k, None) or lm.max_length for k in ("max_position_embeddings", "n_positions")),
    )
    if len(full) > window:
        raise InputError(
            f"prompt + continuation is {len(full) + 1} tokens, more than {lm.name!r}'s window of "
            f"{window}: generate fewer tokens or shorten the prompt."
        )
    inner = type(session).from_encoded(lm, [_encoded(lm, full)], options=dict(session.options))[0]
    n, steps = len(prompt), len(ids)
    positions = list(range(n - 1, n - 1 + steps))
    views = inner.layers()
    request, options, itemsize = inner.request, dict(inner.options), views[0].rec.x.element_size()
    _check(request, options, itemsize, steps)
    targets = _targets(lm, readout, views, positions, ids, foil)
    shared = frozen(inner)
    direct, refusal = _direct(lm, readout, inner, targets, views)
    size = group_size(request, options, itemsize, steps)
    parts = []
    for a in range(0, steps, size):
        group = targets[a : a + size]
        g, top, const, _ = output_batch(readout, group, views[-1])
        _, rows, biases, _ = stack_backward(
            inner.layers(), g, shared, positions=[t.i for t in group], by_layer=by_layer
        )
        parts.append((rows[:, 0], torch.cat([rows, top[:, None]], 1), torch.cat([biases, const[:, None]], 1)))
    sources = torch.cat([p[0] for p in parts]).numpy()  # [T, N]
    by = torch.cat([p[1] for p in parts]).numpy()  # [T, L+1, N]
    bias_by = torch.cat([p[2] for p in parts]).numpy()
    text = lm.tokenizer.decode(ids) if lm.tokenizer is not None else " ".join(map(str, ids))
    note = "given, teacher-forced"
    if mode == "greedy":
        note = f"generated greedily ({steps} tokens" + (", ended at the end token)" if steps < (T or 20) else ")")
    return _result(
        lm,
        inner,
        mode,
        ids,
        positions,
        targets,
        sources,
        by,
        bias_by,
        direct,
        refusal,
        inner.labels,
        inner.encoded.ids,
        n,
        0,
        foil,
        text,
        note,
        by_layer,
        len(parts),
    )


def _direct(lm, readout, inner, targets, views, crosses=None, view=None):
    if (view or lm).spec.placement != "pre" or not readout.linear:
        from . import POST_LN_REFUSAL

        return None, POST_LN_REFUSAL.format(name=lm.name)
    rs = torch.stack([readout.vector(t.u.to(torch.float64), t.x_last.to(torch.float64)).cpu() for t in targets])
    out = direct_batch(views, targets, rs, crosses)
    out["final_bias"] = torch.tensor([readout.constant(t.u.to(torch.float64), t.b) for t in targets])
    return {k: v.numpy() for k, v in out.items()}, None


def _result(
    lm,
    inner,
    mode,
    ids,
    positions,
    targets,
    sources,
    by,
    bias_by,
    direct,
    refusal,
    columns,
    column_ids,
    n_prompt,
    n_source,
    foil,
    text,
    note,
    by_layer,
    batches,
) -> Continuation:
    N = by.shape[-1]
    positions = np.asarray(positions, dtype=np.int64)
    after = np.arange(N)[None, :] > (positions + n_source)[:, None]  # [T, N]: columns the step cannot read
    sources = sources.copy()
    sources[after] = np.nan
    if by_layer:
        by = by.copy()
        by[np.broadcast_to(after[:, None], by.shape)] = np.nan
    foil_mode = None if foil is None else (RUNNER_UP if isinstance(foil, str) and foil == RUNNER_UP else "token")
    direct = direct or {}
    return Continuation(
        model_name=lm.name,
        mode=mode,
        generated_ids=np.asarray(ids, dtype=np.int64),
        tokens=[_label(lm, i) for i in ids],
        positions=positions,
        totals=np.array([t.total for t in targets]),
        sources=sources,
        bias=bias_by.sum(1) + inner_bias(inner),
        columns=[_label(lm, i) for i in column_ids],
        column_ids=np.asarray(column_ids, dtype=np.int64),
        n_prompt=n_prompt,
        foils=np.array([-1 if t.foil is None else t.foil for t in targets], dtype=np.int64),
        foil_tokens=[None if t.foil is None else _label(lm, t.foil) for t in targets],
        foil_mode=foil_mode,
        text=text,
        note=note,
        n_source=n_source,
        direct_refusal=refusal,
        sources_by_layer=by if by_layer else None,
        bias_by_layer=bias_by if by_layer else None,
        batches=batches,
        **{
            k: direct.get(k)
            for k in ("heads", "ff", "attn_bias", "embedding", "final_bias", "cross_heads", "cross_bias")
        },
    )


def inner_bias(inner):
    """Encoder–decoders: the encoder's biases' part per step (set by :func:`_seq2seq`), else 0."""
    return getattr(inner, "_continuation_encoder_bias", 0.0)


# ---------------------------------------------------------------- encoder–decoders
def _seq2seq(session, T, continuation, foil, by_layer):
    from ..record.encdec import target as tgt
    from ..record.encdec.params import cross_params, decoder_view
    from . import seq2seq as s2s

    lm = session.lm
    dec = decoder_view(lm)
    readout = readout_of(dec)
    src = list(session.encoded.ids)
    if continuation is not None:
        labels = _given_ids(lm, continuation, readout.vocab_size, target_side=True)
        tgt_ids, mode, note = tgt.shift_right(lm, labels), "given", "given, teacher-forced"
    elif T is not None:
        tgt_ids, labels, ended = tgt.generate(lm, src, _steps(T))
        mode = "greedy"
        note = f"generated greedily ({len(labels)} tokens" + (", ended at the end token)" if ended else ")")
    else:  # the session's own target (generated or given when it was made)
        s = session.part.seq2seq
        tgt_ids, labels, mode, note = list(s.target.ids), list(s.labels.ids), "session", s.note
    inner = type(session).from_ids(lm, src, tgt_ids, out_ids=labels, options=dict(session.options))
    views = inner.layers("decoder")
    m = len(tgt_ids)
    positions = list(range(m))
    request, options, itemsize = s2s.sources_request(inner), dict(inner.options), views[0].rec.x.element_size()
    _check(request, options, itemsize, m)
    s2s._check_activations(lm)
    targets = _targets(lm, readout, views, positions, labels, foil)
    rec = inner.records()
    pairs = [s2s.working_cross(ctx, rec.cross[l], cross_params(lm, l)) for l, ctx in enumerate(views)]
    direct, refusal = _direct(lm, readout, inner, targets, views, crosses=pairs, view=dec)
    shared = frozen(inner)
    crosses = s2s.cross_adjoints(inner)
    e = rec.memory
    e = e.reshape(-1, e.shape[-1])
    n_src = e.shape[0]
    enc_norm = s2s._encoder_norm(lm, inner.layers("encoder")[-1].dtype)
    size = group_size(request, options, itemsize, m)
    parts = []
    for a in range(0, m, size):
        group = targets[a : a + size]
        g, top, const, _ = output_batch(readout, group, views[-1])
        _, rows, biases, g_es = stack_backward(
            inner.layers("decoder"), g, shared, "decoder", crosses, positions=[t.i for t in group]
        )
        per_layer = torch.stack([_rows(ge, e) for ge in g_es], 1)  # [B, L, n_src]
        above = per_layer.flip(1).cumsum(1).flip(1)
        B = len(group)
        by = torch.cat(
            [torch.cat([above, rows], 2), torch.cat([torch.zeros(B, 1, n_src, dtype=torch.float64), top[:, None]], 2)],
            1,
        )
        g_e = sum(ge.to(torch.float64) for ge in g_es)
        enc_views = inner.layers("encoder")
        enc_bias = torch.zeros(B, dtype=torch.float64)
        if enc_norm is not None:  # e = N(x^L): β is a bias, its linear part transposed
            enc_bias += _dots(g_e, enc_norm.bias)
            g_e = adjoint.norm_adjoint(enc_norm, g_e, enc_views[-1].rec.out.to(torch.float64))
        _, enc_rows, enc_biases, _ = stack_backward(enc_views, g_e, shared, "encoder")
        parts.append(
            (
                torch.cat([enc_rows[:, 0], rows[:, 0]], 1),
                by,
                torch.cat([biases, const[:, None]], 1),
                enc_bias + enc_biases.sum(1),
            )
        )
    sources = torch.cat([p[0] for p in parts]).numpy()
    by = torch.cat([p[1] for p in parts]).numpy()
    bias_by = torch.cat([p[2] for p in parts]).numpy()
    inner._continuation_encoder_bias = torch.cat([p[3] for p in parts]).numpy()
    text = lm.tokenizer.decode(labels, skip_special_tokens=True) if lm.tokenizer is not None else ""
    columns = list(inner.encoded.labels) + list(inner.axis("decoder").labels)
    column_ids = list(inner.encoded.ids) + list(inner.axis("decoder").ids)
    out = _result(
        lm,
        inner,
        mode,
        labels,
        positions,
        targets,
        sources,
        by,
        bias_by,
        direct,
        refusal,
        columns,
        column_ids,
        n_src,
        n_src,
        foil,
        text,
        note,
        by_layer,
        len(parts),
    )
    out.extra["encoder_bias"] = inner._continuation_encoder_bias
    return out


# ---------------------------------------------------------------- the entry point
@torch.no_grad()
def explain_continuation(
    session, max_new_tokens: int | None = None, continuation=None, foil=None, by_layer: bool = False
) -> Continuation:
    """Explain every step of a continuation of ``session``'s text (a decoder's prompt; an encoder–decoder's
    source): greedy up to ``max_new_tokens`` (default 20; encoder–decoders: the session's own target), or the
    given ``continuation`` (text or ids) teacher-forced. ``foil``: None (the logits), a token, or
    ``"runner-up"`` (each step's best other token). ``by_layer``: also ``sources_by_layer``."""
    lm = session.lm
    if continuation is not None and max_new_tokens is not None:
        raise InputError("give max_new_tokens (to generate) or continuation (to explain a known one), not both.")
    if getattr(session, "is_encoder_decoder", False):
        return _seq2seq(session, max_new_tokens, continuation, foil, by_layer)
    if not lm.spec.causal or lm.head_model is None:
        raise NotApplicableError(
            f"{lm.name!r} is not a decoder: a continuation is generated token by token by a causal language model "
            "(e.g. 'smollm2', GPT-2, Llama) or an encoder–decoder's decoder; explain one position with "
            "explain() instead."
        )
    return _decoder(session, max_new_tokens, continuation, foil, by_layer)


__all__ = ["RUNNER_UP", "Continuation", "explain_continuation", "greedy"]

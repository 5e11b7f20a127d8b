"""The per-layer quantities every map family reads: one layer's record seen through its parameters.

Notation: layer input x_j, head h, α^h_ij, head vector f^h(x_j) = (x̂_j W^V_h + b^V_h) W^O_h with x̂ = x
(post-LN) or norm_before_attn(x) (pre-LN). Attention output y_i = Σ_j Σ_h α^h_ij f^h(x_j) + b^O.

Stages (each: Σ_j part_ij + bias_i = the model's own vector):
  attn_res     u_ij = Σ_h α^h_ij f^h(x_j) + δ_ij x_j                    bias b^O
  attn_res_ln  ℓ_ij = N(u_ij) / s_i, N = γ⊙centre (LayerNorm) or γ⊙· (RMSNorm), s_i from the real z_i
               (N is the norm on the attention residual: post-LN norm_after_attn, pre-LN norm_before_ff)
                                                                        bias N(b^O)/s_i + β
The families compute the maps from these: :mod:`normviz.methods.norms` (norms of the stages from per-token
Gram matrices, never building [n, n, d]), :mod:`normviz.methods.feedforward` (the FF block, in row chunks of
the per-pair vectors below), :mod:`normviz.methods.interactions` (ALTI) and others.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..core import pool
from ..models.params import LayerParams, upcast_params

if TYPE_CHECKING:
    from .recorder import LayerRecord

CHUNK_BYTES = (
    32 * 2**20
)  # per row chunk of per-pair vectors: large enough for few chunks, small enough to reuse heap memory


HALF = (torch.float16, torch.bfloat16)


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype maps are computed in: float32 for half-precision models (records upcast per layer), else the
    model's."""
    return torch.float32 if dtype in HALF else dtype


def accumulation_dtype(dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """Small factorisations and activation integrals run in float64 (float32 on mps, which has none)."""
    return torch.float32 if device.type == "mps" else torch.float64


# ---------------------------------------------------------------- scratch memory
_NUMPY_DTYPES = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}


def empty_cpu(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """``torch.empty`` on the CPU, from :mod:`normviz.core.pool` (blocks kept across analyses, already faulted in)
    where numpy has the dtype."""
    np_dtype = _NUMPY_DTYPES.get(dtype)
    if np_dtype is None:
        return torch.empty(shape, dtype=dtype)
    return torch.from_numpy(pool.empty(shape, np_dtype))


class Workspace:
    """Scratch buffers reused from layer to layer (same shape each time), so that the large temporaries are
    allocated and page-faulted in once per analysis instead of once per layer; on the CPU they come from
    :mod:`normviz.core.pool`, so that the next analysis of the same size reuses them too. Contents are only valid
    inside the call that filled them; :meth:`release` hands them back when a family is done."""

    def __init__(self):
        self._buffers: dict[str, torch.Tensor] = {}

    def buffer(
        self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, pooled: bool = True
    ) -> torch.Tensor:
        """Buffer ``name`` of this shape (the same one again while the shape stays); ``pooled=False``: a plain
        ``torch.empty`` (scratch whose size changes with every text, e.g. the FF maps' row chunks, which a
        pool could not reuse and would only hold on to)."""
        t = self._buffers.get(name)
        if t is None or tuple(t.shape) != tuple(shape) or t.dtype != dtype or t.device != device:
            self._buffers.pop(name, None)
            t = (
                empty_cpu(tuple(shape), dtype)
                if pooled and torch.device(device).type == "cpu"
                else torch.empty(shape, dtype=dtype, device=device)
            )
            self._buffers[name] = t
        return t

    def release(self) -> None:
        """Drop every buffer (their pool blocks become free for the next analysis)."""
        self._buffers.clear()


# ---------------------------------------------------------------- one layer
class LayerDecomposition:
    """One layer's record seen through its parameters; derived quantities are computed lazily and cached
    until :meth:`clear`."""

    def __init__(
        self,
        rec: "LayerRecord",
        params: LayerParams,
        index: int = 0,
        chunk_bytes: int = CHUNK_BYTES,
        workspace: "Workspace | None" = None,
        use_kernel: bool | None = None,
        residual_from_norm: bool | None = None,
    ):
        self._rec = rec
        self._params = params
        self.index = index
        self.dtype = working_dtype(rec.x.dtype)
        self.device = rec.x.device
        self.acc = accumulation_dtype(self.dtype, self.device)
        self.chunk_bytes = chunk_bytes
        self.n = rec.x.shape[0]
        self.workspace = workspace if workspace is not None else Workspace()
        self.use_kernel = use_kernel  # None: compiled kernels on CPU when available; False: torch only
        # the FF residual starts from the normed vector (post-LN: h = norm(z)) or from z itself (pre-LN)
        self.residual_from_norm = (
            params.norm_on_ff_residual is not None if residual_from_norm is None else residual_from_norm
        )

    @cached_property
    def rec(self) -> "LayerRecord":
        """The layer's record in the working dtype (half-precision records upcast to float32, per layer)."""
        return self._rec if self._rec.x.dtype == self.dtype else self._rec.to(self.device, self.dtype)

    @cached_property
    def p(self) -> LayerParams:
        """The layer's parameters in the working dtype (half-precision weights upcast, per layer, on use)."""
        return self._params if self._params.w_o.dtype == self.dtype else upcast_params(self._params, self.dtype)

    def clear(self) -> None:
        """Drop the cached derived tensors (the record stays)."""
        for name in [k for k, v in type(self).__dict__.items() if isinstance(v, cached_property)]:
            self.__dict__.pop(name, None)

    # ---- head vectors
    @cached_property
    def x_hat(self) -> torch.Tensor:
        """x (post-LN) or norm_before_attn(x) (pre-LN), through the model's own norm module, so that the value
        vectors are exactly the ones the model used (Llama's RMSNorm computes in float32 even in a float64 model)."""
        norm = self.p.norm_on_input
        return self.rec.x if norm is None else norm.module(self.rec.x)

    @cached_property
    def alpha(self) -> torch.Tensor:
        """α [H, n, n]: recorded, or recomputed from the recorded q, k (long inputs,
        :mod:`normviz.record.attention_capture`)."""
        return self.rec.attention().to(self.dtype)

    @cached_property
    def attn_row_scale(self) -> torch.Tensor | None:
        """1/s_i of the norm P_a on the attention output o_i (Gemma 2/3, OLMo-2), from the recorded o_i; None
        where no norm follows the attention. P_a's γ is folded into W^O (:func:`normviz.models.params.layer_params`),
        so what reaches the residual stream is Σ_h α^h_ij f^h(x_j) / s_i."""
        norm = self.p.attn_out_norm
        return None if norm is None else 1.0 / norm.scale(self.rec.o.to(self.dtype))

    @cached_property
    def ff_row_scale(self) -> torch.Tensor | None:
        """1/s_i of the norm P_f on the FF output (Gemma 2/3, OLMo-2), from the recorded FF output; None where
        no norm follows the FF. Its γ is folded into W_out."""
        norm = self.p.ff_out_norm
        return None if norm is None else 1.0 / norm.scale(self.rec.m.to(self.dtype))

    @cached_property
    def unit_gates(self) -> torch.Tensor | None:
        """A mixture of experts: each FF unit's gate per token [n, U] — the router's weight of the unit's expert
        at that token, frozen at its real value (0 where it was not chosen), the shared expert's sigmoid gate (or 1);
        None for a dense FF."""
        units = self.p.expert_units
        if units is None:
            return None
        g = self.rec.gates.to(self.dtype)
        n_routed = g.shape[1]
        cols = [g]
        if len(units) > n_routed:  # the shared expert
            sg = self.rec.shared_gate
            cols.append(
                torch.sigmoid(sg.to(self.dtype))
                if sg is not None
                else torch.ones(self.n, 1, dtype=self.dtype, device=self.device)
            )
        g = torch.cat(cols, 1)
        return g.repeat_interleave(torch.tensor(units, device=g.device), dim=1)

    @cached_property
    def mix_alpha(self) -> torch.Tensor:
        """The weights that mix the head vectors into the residual stream: α^h_ij, or α^h_ij / s_i where a norm
        P_a follows the attention (its real scale at the receiving token i; the ``attention`` map stays α)."""
        c = self.attn_row_scale
        return self.alpha if c is None else self.alpha * c[None, :, None]

    def out_bias(self, rows: slice | None = None) -> torch.Tensor:
        """The attention block's bias term at the rows [c, d]: b^O (P_a's linear part folded, / s_i with P_a)."""
        c = self.attn_row_scale
        n = self.n if rows is None else rows.stop - rows.start
        if c is None:
            return self.b_o.expand(n, -1)
        return self.b_o[None] * (c if rows is None else c[rows])[:, None]

    @cached_property
    def head_values(self) -> torch.Tensor:
        """v^h(x_j) = x̂_j W^V_h + b^V_h per query head (GQA: shared by its group), shape [H, n, head_dim]."""
        p = self.p
        if self.rec.v is not None:  # recorded in the forward pass: exactly the values the model used
            v = self.rec.v[:, p.value_columns].to(self.dtype)
        else:
            v = self.x_hat @ p.w_v
            if p.b_v is not None:
                v = v + p.b_v
        v = v.reshape(self.n, p.n_kv_heads, p.head_dim).transpose(0, 1)  # [KV, n, dh]
        if p.n_kv_heads != p.n_heads:
            v = v.repeat_interleave(p.n_heads // p.n_kv_heads, dim=0)
        return v

    @cached_property
    def head_vectors(self) -> torch.Tensor:
        """f^h(x_j) = (x̂_j W^V_h + b^V_h) W^O_h, shape [H, n, d] (b^O excluded)."""
        return torch.bmm(self.head_values, self.p.head_w_o())

    @property
    def ln_attn(self):
        """The norm on the attention residual: norm_after_attn (post-LN) or norm_before_ff (pre-LN)."""
        return self.p.norm_on_attn_residual

    @property
    def ff_z(self) -> torch.Tensor:
        """The real input of the FF's norm: z = x + Attn (the attention residual), or, in a parallel block, the
        layer input x itself."""
        return self.rec.x if self.p.parallel else self.rec.z_attn

    @cached_property
    def ln_scale(self) -> torch.Tensor:
        """s_i of that norm, from the real pre-norm vector z_i (parallel blocks: x_i)."""
        return self.ln_attn.scale(self.ff_z)

    @cached_property
    def ln_attn_out(self) -> torch.Tensor:
        """That norm's output N(z_i)/s_i + β by the formula the ``attn_res_ln`` parts use (Σ_j ℓ_ij + bias_i
        equals it to rounding): the FF block's input, the end point of its integration. Not the norm module's
        own output: Llama-family RMSNorm rounds through float32 even in a float64 model, which would leave the
        FF parts ~1e-7 short of their end point."""
        out = self.ln_attn.linear_part(self.ff_z) / self.ln_scale[:, None]
        return out + self.ln_attn.bias if self.ln_attn.bias is not None else out

    @cached_property
    def head_vectors_ln(self) -> torch.Tensor:
        """N(f^h(x_j)) for the norm N on the attention residual. N is linear in the d-vector, so it is folded
        into W^O once: N(v W^O_h) = v N(W^O_h) (rows of W^O_h mapped by N)."""
        return torch.bmm(self.head_values, self.ln_attn.linear_part(self.p.head_w_o()))

    @cached_property
    def x_ln(self) -> torch.Tensor:
        return self.ln_attn.linear_part(self.rec.x)

    @cached_property
    def b_o(self) -> torch.Tensor:
        d = self.rec.x.shape[-1]
        return self.p.b_o if self.p.b_o is not None else torch.zeros(d, dtype=self.dtype, device=self.device)

    # ---- per-pair vectors (row chunks)
    def mix(self, f: torch.Tensor, x: torch.Tensor, rows: slice) -> torch.Tensor:
        """Σ_h α^h_ij f^h_j + δ_ij x_j for i in rows: [c, n, d_f]."""
        out = torch.einsum("hij,hjd->ijd", self.mix_alpha[:, rows], f)
        idx = torch.arange(rows.start, rows.stop, device=self.device)
        out[idx - rows.start, idx] += x[idx]
        return out

    def ff_mix(self, f: torch.Tensor, x: torch.Tensor, rows: slice) -> torch.Tensor:
        """What the FF's input is made of at the rows: :meth:`mix` (the heads and the residual), or in a parallel
        block only δ_ij x_j (the FF reads the layer input: a token's own residual)."""
        if not self.p.parallel:
            return self.mix(f, x, rows)
        out = torch.zeros(rows.stop - rows.start, self.n, x.shape[-1], dtype=x.dtype, device=x.device)
        idx = torch.arange(rows.start, rows.stop, device=self.device)
        out[idx - rows.start, idx] = x[idx]
        return out

    def attn_res_vectors(self, rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
        """(u_ij [c,n,d], bias [c,d]): Σ_j u_ij + b^O = z_i, the real pre-norm vector."""
        u = self.mix(self.head_vectors, self.rec.x, rows)
        return u, self.out_bias(rows)

    def attn_res_ln_vectors(self, rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
        """(ℓ_ij, bias_i): Σ_j ℓ_ij + bias_i = the norm's output."""
        s = self.ln_scale[rows]
        parts = self.ff_mix(self.head_vectors_ln, self.x_ln, rows) / s[:, None, None]
        bias = (
            self.ln_attn.linear_part(self.out_bias(rows)) / s[:, None]
            if not self.p.parallel
            else torch.zeros_like(self.out_bias(rows))
        )
        if self.ln_attn.bias is not None:
            bias = bias + self.ln_attn.bias
        return parts, bias

    def row_chunks(self, bytes_per_row_cell: int | None = None):
        """Slices of receiving tokens whose per-pair tensors fit ``chunk_bytes``; ``bytes_per_row_cell`` is
        the size of what one pair (i, j) holds at once (default: a few d-vectors)."""
        per_cell = bytes_per_row_cell or 6 * self.rec.x.shape[-1] * self.rec.x.element_size()
        c = max(1, min(self.n, self.chunk_bytes // max(self.n * per_cell, 1)))
        for start in range(0, self.n, c):
            yield slice(start, min(self.n, start + c))

"""Exact decomposition of one layer into token-to-token contributions (Kobayashi et al. 2020/2021/2024).

Notation: layer input x_j, head h, α^h_ij, head vector f^h(x_j) = (x̂_j W^V_h + b^V_h) W^O_h with x̂ = x
(post-LN) or LN1(x) (pre-LN). Attention output y_i = Σ_j Σ_h α^h_ij f^h(x_j) + b^O.

Stages (each: Σ_j part_ij + bias_i = the model's own vector):
  attn_res     u_ij = Σ_h α^h_ij f^h(x_j) + δ_ij x_j                    bias b^O
  attn_res_ln  ℓ_ij = N(u_ij) / s_i, N = γ⊙centre (LayerNorm) or γ⊙· (RMSNorm), s_i from the real z_i
                                                                        bias N(b^O)/s_i + β
  ff           FF(input) split: pre-activation linearly, activation by integrated gradients from 0
  ff_res       ff_ij + (u_ij pre-LN | ℓ_ij post-LN)
  ff_res_ln    post-LN only: LN2 decomposed like attn_res_ln

Norm maps never build [H,n,n,d]: every per-pair vector of contributing token j is a combination
Σ_h c_h f^h_j + c_x x_j of the H+1 span vectors of j, so its squared norm is cᵀ G_j c with G_j their
(H+1)×(H+1) Gram matrix (plain, or under the norm's linear part). Off the diagonal c = α_ij (the residual
enters only at i = j), summed in α's own layout by :mod:`normviz.norm_maps` (compiled kernels on CPU,
torch elsewhere); the n diagonal pairs add x_j.
The FF maps are O(n²·d·d_ff) and are computed in row chunks of bounded memory.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np
import torch

from . import norm_maps
from .models.params import LayerParams
from .record import LayerRecord

CHUNK_BYTES = 32 * 2**20  # per row chunk of per-pair vectors: large enough for few chunks, small enough to reuse heap memory


def accumulation_dtype(dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """Small factorisations and activation integrals run in float64 (float32 on mps, which has none)."""
    return torch.float32 if device.type == "mps" else torch.float64


# ---------------------------------------------------------------- activation integrals
def _j_integral(x: np.ndarray) -> np.ndarray:
    """J(x) = ∫_0^x u σ(−u) du for x ≥ 0, in closed form (float64).

    Σ_k (−1)^{k+1} e^{−ku}(u/k + 1/k²) integrates the tail, so J(x) = π²/12 − x·log(1+e^{−x}) + Li2(−e^{−x})
    (Li2(−y) = scipy's spence(1+y)). Below x = 0.1, where that difference cancels, the Taylor series
    x²/4 − x³/12 + x⁵/240 − x⁷/3360 + 17x⁹/725760 (from u/(1+e^u) = u/2 − u²/4 + u⁴/48 − …) is used.
    """
    from scipy.special import spence

    x = np.asarray(x, dtype=np.float64)
    y = np.exp(-x)
    closed = np.pi**2 / 12 - x * np.log1p(y) + spence(1.0 + y)
    x2 = x * x
    taylor = x2 * (0.25 + x * (-1 / 12 + x2 * (1 / 240 + x2 * (-1 / 3360 + x2 * 17 / 725760))))
    return np.where(x < 0.1, taylor, closed)


def silu_path_integral(a: torch.Tensor) -> torch.Tensor:
    """I(a) = ∫_0^1 silu(t·a) dt, to float64 precision.

    ∫_0^a silu = a²/2 − J(a) for a ≥ 0 and J(|a|) for a < 0 (J from :func:`_j_integral`); I(a) = that / a,
    I(0) = 0.
    """
    an = a.detach().to("cpu", torch.float64).numpy()
    j = _j_integral(np.abs(an))
    s = np.where(an >= 0, an * an / 2 - j, j)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(an == 0, 0.0, s / np.where(an == 0, 1.0, an))
    return torch.from_numpy(out).to(device=a.device, dtype=a.dtype)


def activation_ratio(act, p: torch.Tensor) -> torch.Tensor:
    """g(p)/p per unit: the exact integrated-gradients factor of an activation with g(0) = 0.

    Part c of the pre-activation gets p_c·g(p)/p; at p = 0 the limit g′(0) is used.
    """
    g = act(p)
    h = 1e-4
    probe = torch.tensor([h, -h], dtype=torch.float64)  # on the CPU: activations hold no weights; mps has no f64
    slope0 = float((act(probe)[0] - act(probe)[1]) / (2 * h))
    safe = torch.where(p == 0, torch.ones_like(p), p)
    return torch.where(p == 0, torch.full_like(p, slope0), g / safe)


def check_activation(act, gated: bool) -> str | None:
    """Why an activation can't be split exactly, or None."""
    probe = torch.linspace(-6, 6, 25, dtype=torch.float64)
    zero = float(act(torch.zeros(1, dtype=torch.float64))[0])
    if abs(zero) > 1e-12:
        return f"activation {type(act).__name__} has g(0) = {zero} ≠ 0"
    if gated and not torch.allclose(act(probe), probe * torch.sigmoid(probe), atol=1e-12, rtol=1e-12):
        return f"gated FF with activation {type(act).__name__}: only SiLU/Swish gates are decomposed"
    return None


# ---------------------------------------------------------------- scratch memory
class Workspace:
    """Scratch buffers reused from layer to layer (same shape each time), so that the large temporaries are
    allocated and page-faulted in once per analysis instead of once per layer. Contents are only valid
    inside the call that filled them."""

    def __init__(self):
        self._buffers: dict[str, torch.Tensor] = {}

    def buffer(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        t = self._buffers.get(name)
        if t is None or tuple(t.shape) != tuple(shape) or t.dtype != dtype or t.device != device:
            t = torch.empty(shape, dtype=dtype, device=device)
            self._buffers[name] = t
        return t


# ---------------------------------------------------------------- one layer
class LayerDecomposition:
    """All maps of one layer, as pure functions of its record and parameters (lazily cached)."""

    def __init__(self, rec: LayerRecord, params: LayerParams, placement: str, chunk_bytes: int = CHUNK_BYTES,
                 workspace: "Workspace | None" = None, targets: dict[str, torch.Tensor] | None = None,
                 use_kernel: bool | None = None):
        self.rec = rec
        self.p = params
        self.placement = placement
        self.dtype = rec.x.dtype
        self.device = rec.x.device
        self.acc = accumulation_dtype(self.dtype, self.device)
        self.chunk_bytes = chunk_bytes
        self.n = rec.x.shape[0]
        self.workspace = workspace if workspace is not None else Workspace()
        self.targets = targets or {}  # key -> output buffer of this layer (e.g. a view of the result array)
        self.use_kernel = use_kernel  # None: compiled kernels on CPU when available; False: torch only

    # ---- head vectors
    @cached_property
    def x_hat(self) -> torch.Tensor:
        """x (post-LN) or LN1(x) (pre-LN), through the model's own norm module, so that the value vectors
        are exactly the ones the model used (Llama's RMSNorm computes in float32 even in a float64 model)."""
        return self.rec.x if self.placement == "post" else self.p.norm1.module(self.rec.x)

    @cached_property
    def alpha(self) -> torch.Tensor:
        return self.rec.attn.to(self.dtype)

    @cached_property
    def head_values(self) -> torch.Tensor:
        """v^h(x_j) = x̂_j W^V_h + b^V_h per query head (GQA: shared by its group), shape [H, n, head_dim]."""
        p = self.p
        width = p.n_kv_heads * p.head_dim
        if self.rec.v is not None:  # recorded in the forward pass: exactly the values the model used
            v = self.rec.v[:, -width:] if self.rec.v.shape[-1] != width else self.rec.v  # GPT-2: q|k|v → v
            v = v.to(self.dtype)
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

    @cached_property
    def ln_attn(self):
        """The norm that follows the attention residual: LN1 (post-LN) or LN2 (pre-LN)."""
        return self.p.norm1 if self.placement == "post" else self.p.norm2

    @cached_property
    def ln_scale(self) -> torch.Tensor:
        """s_i of that norm, from the real pre-norm vector z_i."""
        return self.ln_attn.scale(self.rec.z_attn)

    @cached_property
    def head_vectors_ln(self) -> torch.Tensor:
        """N(f^h(x_j)) for the norm N after the attention residual. N is linear in the d-vector, so it is
        folded into W^O once: N(v W^O_h) = v N(W^O_h) (rows of W^O_h mapped by N)."""
        return torch.bmm(self.head_values, self.ln_attn.linear_part(self.p.head_w_o()))

    @cached_property
    def x_ln(self) -> torch.Tensor:
        return self.ln_attn.linear_part(self.rec.x)

    @cached_property
    def b_o(self) -> torch.Tensor:
        d = self.rec.x.shape[-1]
        return self.p.b_o if self.p.b_o is not None else torch.zeros(d, dtype=self.dtype, device=self.device)

    # ---- norm family (per-token Gram matrices)
    @cached_property
    def _grams(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token Gram matrices [n, H+1, H+1] of e_j = [f^1_j … f^H_j, x_j], plain and under the linear
        part N of the norm after the attention residual: ⟨Na, Nb⟩ = Σ_k γ_k² a_k b_k (RMSNorm); for LayerNorm,
        with centring, Σγ²ab − b̄ Σγ²a − ā Σγ²b + ā b̄ Σγ².

        On CPU a compiled kernel reads f and x once for both (:mod:`normviz.norm_maps`); elsewhere torch does
        the same with two batched products. Computed in the working dtype: on the embedded models the float32
        maps stay within 3.5e-7 (elementwise, relative) of float64 arithmetic on the same records
        (tests/test_embedded.py); float64 models get float64 throughout."""
        if norm_maps.applicable([self]):
            grams = norm_maps.run_grams([self])
            if grams is not None:
                return grams[0][0], grams[1][0]
        H, d = self.p.n_heads, self.rec.x.shape[-1]
        f = self.workspace.buffer("head_vectors", (H, self.n, d), self.dtype, self.device)
        torch.bmm(self.head_values, self.p.head_w_o().to(self.dtype), out=f)
        return self._grams_torch(f, self.rec.x, self.ln_attn.weight.to(self.dtype), self.ln_attn.kind == "layernorm")

    def _grams_torch(self, f: torch.Tensor, x: torch.Tensor, g: torch.Tensor, centre: bool):
        """The same Grams with torch ops (any device): e laid out [n, H+1, d], then batched products."""
        H, n, d = f.shape
        e = self.workspace.buffer("span", (n, H + 1, d), self.dtype, self.device)
        e[:, :H] = f.transpose(0, 1)
        e[:, H] = x
        plain = torch.bmm(e, e.transpose(1, 2))
        eg = self.workspace.buffer("span_weighted", (n, H + 1, d), self.dtype, self.device)
        torch.mul(e, g, out=eg)
        weighted = torch.bmm(eg, eg.transpose(1, 2))  # Σ_k γ_k² a_k b_k
        if centre:
            s = eg @ g  # Σ_k γ_k² e_k, [n, H+1]
            m = e.mean(-1)  # ē
            weighted = (weighted - m.unsqueeze(1) * s.unsqueeze(2) - m.unsqueeze(2) * s.unsqueeze(1)
                        + (g @ g) * m.unsqueeze(2) * m.unsqueeze(1))
        return plain, weighted

    def attention(self) -> torch.Tensor:
        return self.rec.attn

    def norm_family(self, keys) -> dict[str, torch.Tensor]:
        """The keys asked for among norm [H, n, n], norm_layer, attn_res, attn_res_ln [n, n]:

        norm        ‖α^h_ij f^h_j‖ = α^h_ij ‖f^h_j‖
        norm_layer  ‖Σ_h α^h_ij f^h_j‖ = sqrt(α_ijᵀ G_j α_ij)
        attn_res    ‖Σ_h α^h_ij f^h_j + δ_ij x_j‖: norm_layer off the diagonal, where x_j does not enter
        attn_res_ln ‖N(u_ij)‖ / s_i with N = γ⊙centre (LayerNorm) or γ⊙· (RMSNorm), G under N
        computed by :func:`normviz.norm_maps.norm_family_run` for this one layer (written into ``targets``)."""
        return norm_maps.norm_family_run([self], keys, targets={k: t[None] for k, t in self.targets.items()})[0]

    # ---- per-pair vectors (row chunks)
    def _mix(self, f: torch.Tensor, x: torch.Tensor, rows: slice) -> torch.Tensor:
        """Σ_h α^h_ij f^h_j + δ_ij x_j for i in rows: [c, n, d_f]."""
        out = torch.einsum("hij,hjd->ijd", self.alpha[:, rows], f)
        idx = torch.arange(rows.start, rows.stop, device=self.device)
        out[idx - rows.start, idx] += x[idx]
        return out

    def attn_res_vectors(self, rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
        """(u_ij [c,n,d], bias [c,d]): Σ_j u_ij + b^O = z_i, the real pre-norm vector."""
        u = self._mix(self.head_vectors, self.rec.x, rows)
        return u, self.b_o.expand(u.shape[0], -1)

    def attn_res_ln_vectors(self, rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
        """(ℓ_ij, bias_i): Σ_j ℓ_ij + bias_i = the norm's output."""
        s = self.ln_scale[rows]
        parts = self._mix(self.head_vectors_ln, self.x_ln, rows) / s[:, None, None]
        bias = self.ln_attn.linear_part(self.b_o) / s[:, None]
        if self.ln_attn.bias is not None:
            bias = bias + self.ln_attn.bias
        return parts, bias

    @cached_property
    def ff_input(self) -> torch.Tensor:
        """The real FF input: LN1(z) (post-LN) or LN2(z) (pre-LN), through the model's own module."""
        return self.ln_attn.module(self.rec.z_attn)

    @cached_property
    def _ff_projected(self) -> dict:
        """Head vectors pushed through the FF input projection(s): pre-activation parts = Σ_h α·q / s."""
        p = self.p
        mats = {"in": p.w_in} if p.ff_kind == "mlp" else {"in": p.w_in, "up": p.w_up}
        return {k: (self.head_vectors_ln @ w, self.x_ln @ w) for k, w in mats.items()}

    def _pre_activation_parts(self, key: str, w: torch.Tensor, b: torch.Tensor | None, rows: slice,
                              ln_bias: torch.Tensor):
        q, xq = self._ff_projected[key]
        s = self.ln_scale[rows]
        parts = self._mix(q, xq, rows) / s[:, None, None]
        bias = ln_bias @ w
        if b is not None:
            bias = bias + b
        total = self.ff_input[rows] @ w
        if b is not None:
            total = total + b
        return parts, bias, total

    def ff_vectors(self, rows: slice) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Per-pair vectors of ff, ff_res (and ff_res_ln post-LN) for rows, with their bias terms."""
        p = self.p
        ln_parts, ln_bias = self.attn_res_ln_vectors(rows)
        pa, pb, ptot = self._pre_activation_parts("in", p.w_in, p.b_in, rows, ln_bias)
        if p.ff_kind == "mlp":
            r = activation_ratio(p.act, ptot)
            attr = pa * r[:, None, :]
            attr_b = pb * r
        else:
            ua, ub, utot = self._pre_activation_parts("up", p.w_up, p.b_up, rows, ln_bias)
            a = ptot.to(self.acc)
            i2 = silu_path_integral(a)
            a_i1 = a * torch.sigmoid(a) - i2  # a·∫_0^1 t·silu′(t a) dt
            safe = torch.where(a == 0, torch.ones_like(a), a)
            i1 = torch.where(a == 0, torch.full_like(a, 0.25), a_i1 / safe)
            coef_gate = (utot.to(self.acc) * i1).to(self.dtype)
            coef_up = i2.to(self.dtype)
            attr = pa * coef_gate[:, None, :] + ua * coef_up[:, None, :]
            attr_b = pb * coef_gate + ub * coef_up
        ff = attr @ p.w_out
        ff_b = attr_b @ p.w_out
        if p.b_out is not None:
            ff_b = ff_b + p.b_out
        del attr
        if self.placement == "pre":
            u, u_b = self.attn_res_vectors(rows)
            res, res_b = u + ff, u_b + ff_b
        else:
            res, res_b = ln_parts + ff, ln_bias + ff_b
        out = {"ff": (ff, ff_b), "ff_res": (res, res_b)}
        if self.placement == "post":
            s2 = self.p.norm2.scale(self.rec.z_ff[rows])
            parts2 = self.p.norm2.linear_part(res) / s2[:, None, None]
            bias2 = self.p.norm2.linear_part(res_b) / s2[:, None]
            if self.p.norm2.bias is not None:
                bias2 = bias2 + self.p.norm2.bias
            out["ff_res_ln"] = (parts2, bias2)
        return out

    def row_chunks(self):
        p = self.p
        d_ff = p.w_out.shape[0]
        d = p.w_out.shape[1]
        per_row = self.n * (3 * d_ff + 6 * d) * self.rec.x.element_size()
        c = max(1, min(self.n, self.chunk_bytes // max(per_row, 1)))
        for start in range(0, self.n, c):
            yield slice(start, min(self.n, start + c))

    def ff_maps(self, keys) -> dict[str, torch.Tensor]:
        """Norms ‖part_ij‖ of the FF stages in `keys`, [n, n] each, chunked over rows."""
        keys = [k for k in keys if k in ("ff", "ff_res", "ff_res_ln")]
        out = {k: torch.empty(self.n, self.n, dtype=self.dtype, device=self.device) for k in keys}
        for rows in self.row_chunks():
            vec = self.ff_vectors(rows)
            for k in keys:
                out[k][rows] = vec[k][0].norm(dim=-1)
        return out

"""The norm family (norm, norm_layer, attn_res, attn_res_ln) for a run of layers at once.

Per-token Gram matrices G_j of [f^1_j … f^H_j, x_j], then ‖Σ_h c_h f^h_j + c_x x_j‖² = cᵀ G_j c.
With the compiled backend (CPU) the layers of a run share one call of each kernel (:mod:`.kernels`):

  1. f^h = v^h W^O_h per layer (one batched product each, into one scratch buffer [L, H, n, d]);
  2. ``span_grams_packed``: plain and normed Grams of every layer and token in one pass over f and x, laid out
     for the next kernel, with ‖f^h_j‖ and 1/s_j;
  3. ``pair_norms_fused``: every α-sized output (norm, norm_layer, attn_res, attn_res_ln) in one pass over α,
     the diagonal pairs (where the residual x_j enters, c_j = (α^1_jj … α^H_jj, 1)) included.

Two large calls instead of dozens of small ones per layer: the CPU's threads are handed between torch and
the kernels twice per run. The torch backend (GPU/mps, no numba) does the same with batched products
(:func:`grams_torch`, :func:`.pair_norms.pair_norms_torch`) and the diagonal fixed up in torch.
"""

from __future__ import annotations

import numpy as np
import torch

from . import kernels
from .pair_norms import pair_norms_torch

KEYS = ("norm", "norm_layer", "attn_res", "attn_res_ln")
RUN_BYTES = 24 * 2**20  # scratch for the head vectors f of one run (BERT-base: 12 layers at n ≤ 56, 5 at 128, 1 at 512)


def backend(ctxs) -> str:
    """ "kernels" where the compiled path can serve these layers (CPU, float32/float64, numba present, one
    shape), else "torch". The one place this is decided."""
    ok = (
        bool(ctxs)
        and kernels.available()
        and all(
            c.device.type == "cpu" and c.dtype in (torch.float32, torch.float64) and c.use_kernel is not False
            for c in ctxs
        )
        and len({(c.dtype, c.n, c.rec.n_heads, c.rec.x.shape[-1], c.ln_attn.kind) for c in ctxs}) == 1
        and ctxs[0].ln_attn.kind != "identity"
    )  # the kernel computes a LayerNorm's or an RMSNorm's scale
    return "kernels" if ok else "torch"


def runs(ctxs, run_bytes: int = RUN_BYTES):
    """Consecutive runs of layers whose head vectors fit in ``run_bytes`` together (at least one layer)."""
    c = ctxs[0]
    per_layer = c.rec.n_heads * c.n * c.rec.x.shape[-1] * c.rec.x.element_size()
    size = max(1, run_bytes // max(per_layer, 1))
    for start in range(0, len(ctxs), size):
        yield slice(start, min(len(ctxs), start + size))


def _head_vectors(ctxs) -> torch.Tensor:
    """f [L, H, n, d] of the run, in one scratch buffer."""
    c0 = ctxs[0]
    L, H, n, d, dtype = len(ctxs), c0.rec.n_heads, c0.n, c0.rec.x.shape[-1], c0.dtype
    f = c0.workspace.buffer("head_vectors_run", (L, H, n, d), dtype, c0.device)
    for layer, c in enumerate(ctxs):
        torch.bmm(c.head_values, c.p.head_w_o().to(dtype), out=f[layer])
    return f


def grams_torch(ctxs) -> tuple[torch.Tensor, torch.Tensor]:
    """The same Grams with torch ops (any device): e laid out [n, H+1, d], then batched products. Under N:
    ⟨Na, Nb⟩ = Σ_k γ_k² a_k b_k (RMSNorm); for LayerNorm, with centring, Σγ²ab − b̄ Σγ²a − ā Σγ²b + ā b̄ Σγ²."""
    f_run = _head_vectors(ctxs)
    plains, weighteds = [], []
    for f, c in zip(f_run, ctxs):
        H, n, d = f.shape
        g = c.ln_attn.weight.to(c.dtype)
        e = c.workspace.buffer("span", (n, H + 1, d), c.dtype, c.device)
        e[:, :H] = f.transpose(0, 1)
        e[:, H] = c.rec.x
        plain = torch.bmm(e, e.transpose(1, 2))
        eg = c.workspace.buffer("span_weighted", (n, H + 1, d), c.dtype, c.device)
        torch.mul(e, g, out=eg)
        weighted = torch.bmm(eg, eg.transpose(1, 2))  # Σ_k γ_k² a_k b_k
        if c.ln_attn.kind == "layernorm":
            s = eg @ g  # Σ_k γ_k² e_k, [n, H+1]
            m = e.mean(-1)  # ē
            weighted = (
                weighted
                - m.unsqueeze(1) * s.unsqueeze(2)
                - m.unsqueeze(2) * s.unsqueeze(1)
                + (g @ g) * m.unsqueeze(2) * m.unsqueeze(1)
            )
        plains.append(plain)
        weighteds.append(weighted)
    return torch.stack(plains), torch.stack(weighteds)


def _stacked(ws, name: str, tensors, dtype) -> torch.Tensor:
    """The run's per-layer tensors stacked into workspace buffer ``name`` (no fresh array per run). On the CPU
    copied by numpy, in this thread: each is small (minilm n = 128: 196 KB), and a torch copy pays its
    threads' wake-up and dispatch per call (0.5 ms for six at n = 128, 2 threads) for a few µs of copying."""
    out = ws.buffer(name, (len(tensors),) + tuple(tensors[0].shape), dtype, tensors[0].device)
    cpu = out.device.type == "cpu"
    dst = out.numpy() if cpu else None
    for k, t in enumerate(tensors):
        if cpu and t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64):
            np.copyto(dst[k], t.detach().numpy(), casting="same_kind")
        else:
            out[k].copy_(t)
    return out


def packed_grams(ctxs, f: torch.Tensor) -> tuple[torch.Tensor, ...] | None:
    """``span_grams_packed`` for the layers of ``ctxs`` from their head vectors f [L, H, n, d]: (gram [L, 2, Hp,
    Hp, n], gx [L, 2, H + 1, n], ‖f‖ [L, H, n], 1/s [L, n]) in workspace buffers, laid out for the pair kernels;
    None if the kernel can't run. Reads no α (a long input's layer streams it afterwards)."""
    c0 = ctxs[0]
    L, H, n, dtype, ws = f.shape[0], f.shape[1], c0.n, c0.dtype, c0.workspace
    Hp = -(-H // 4) * 4
    x = _stacked(ws, "norms_x", [c.rec.x for c in ctxs], dtype)
    z = _stacked(ws, "norms_z", [c.rec.z_attn for c in ctxs], dtype)
    gamma2 = _stacked(ws, "norms_gamma2", [c.ln_attn.weight for c in ctxs], dtype)
    np.square(gamma2.numpy(), out=gamma2.numpy())
    gram = ws.buffer("norms_gram", (L, 2, Hp, Hp, n), dtype, c0.device)
    gx = ws.buffer("norms_gram_x", (L, 2, H + 1, n), dtype, c0.device)
    fnorm = ws.buffer("norms_fnorm", (L, H, n), dtype, c0.device)
    inv_s = ws.buffer("norms_inv_s", (L, n), dtype, c0.device)
    if not kernels.run(
        "span_grams_packed",
        f.numpy(),
        x.numpy(),
        z.numpy(),
        gamma2.numpy(),
        c0.ln_attn.kind == "layernorm",
        float(c0.ln_attn.eps),
        gram.numpy(),
        gx.numpy(),
        fnorm.numpy(),
        inv_s.numpy(),
    ):
        return None
    return gram, gx, fnorm, inv_s


def kernel_run(ctxs, keys, dest, alpha: torch.Tensor | None) -> dict[str, torch.Tensor] | None:
    """The compiled path for a run of layers: f per layer (torch), then two kernel calls — ``span_grams_packed``
    (Grams in the pair kernel's layout, ‖f‖, 1/s) and ``pair_norms_fused`` (every output, diagonal included,
    in one pass over α). None if a kernel can't run (the caller then takes the torch path)."""
    c0 = ctxs[0]
    L, H, n, dtype, ws = len(ctxs), c0.rec.n_heads, c0.n, c0.dtype, c0.workspace
    grams = packed_grams(ctxs, _head_vectors(ctxs))
    if grams is None:
        return None
    gram, gx, fnorm, inv_s = grams
    if alpha is None and L == 1 and c0.mix_alpha.is_contiguous():
        alpha = c0.mix_alpha.unsqueeze(0)  # one layer (a long input's layer change): α itself, not a copy of it
    if alpha is None:  # α (α/s_i where a norm follows the attention: LayerDecomposition.mix_alpha)
        alpha = _stacked(ws, "norms_alpha", [c.mix_alpha for c in ctxs], dtype)
    out = {k: dest(k, (L, H, n, n) if k == "norm" else (L, n, n)) for k in keys}
    arrays = {k: t.numpy() for k, t in out.items()}
    direct = {k: kernels.c_contiguous_out(a) for k, a in arrays.items()}
    unused = np.empty((1, 1, 1), dtype=gram.numpy().dtype)
    a = alpha.numpy() if alpha.is_contiguous() else alpha.contiguous().numpy()
    if not kernels.run(
        "pair_norms_fused",
        a,
        gram.numpy(),
        gx.numpy(),
        fnorm.numpy(),
        inv_s.numpy(),
        direct.get("norm", unused[None]),
        direct.get("norm_layer", unused),
        direct.get("attn_res", unused),
        direct.get("attn_res_ln", unused),
        "norm" in keys,
        "norm_layer" in keys,
        "attn_res" in keys,
        "attn_res_ln" in keys,
    ):
        return None
    for k, arr in arrays.items():
        if direct[k] is not arr:
            arr[...] = direct[k]
    return out


def norm_family_run(
    ctxs, keys, use: str = "torch", targets: dict[str, torch.Tensor] | None = None, alpha: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """The keys asked for (among :data:`KEYS`) for the layers of ``ctxs`` (same n, H, d, dtype, device), as
    {key: [L_run, …]} tensors.

    ``use``: the backend from :func:`backend` ("kernels" falls back to torch if a kernel can't run).
    ``targets``: key → [L_run, …] tensors to write into (e.g. views of the result arrays); ``alpha``: the
    run's attention weights already stacked [L_run, H, n, n], else they are stacked here.
    """
    keys = [k for k in keys if k in KEYS]
    c0 = ctxs[0]
    L, H, n, dtype, device = len(ctxs), c0.rec.n_heads, c0.n, c0.dtype, c0.device
    if not keys:
        return {}
    targets = dict(targets or {})

    def dest(key: str, shape: tuple[int, ...]) -> torch.Tensor:
        t = targets.get(key)
        if t is not None and tuple(t.shape) == shape and t.dtype == dtype and t.device == device:
            return t
        return torch.empty(shape, dtype=dtype, device=device)

    if alpha is not None and (tuple(alpha.shape) != (L, H, n, n) or alpha.dtype != dtype or alpha.device != device):
        alpha = None
    if use == "kernels":
        out = kernel_run(ctxs, keys, dest, alpha)
        if out is not None:
            return {k: out[k] for k in keys}
    # the torch path (also where a kernel could not run)
    plain, weighted = grams_torch(ctxs)
    if alpha is None:
        alpha = torch.stack([c.mix_alpha for c in ctxs])
    out: dict[str, torch.Tensor] = {}
    stage_grams, stage_scales, stage_dests = [], [], []
    plain_key = next((k for k in ("norm_layer", "attn_res") if k in keys), None)
    if plain_key:
        stage_grams.append(plain[..., :H, :H])
        stage_scales.append(torch.ones(L, n, dtype=dtype, device=device))
        stage_dests.append(dest(plain_key, (L, n, n)))
    if "attn_res_ln" in keys:
        inv_s = 1.0 / torch.stack([c.ln_scale.to(dtype) for c in ctxs])  # [L, n]
        stage_grams.append(weighted[..., :H, :H])
        stage_scales.append(inv_s)
        stage_dests.append(dest("attn_res_ln", (L, n, n)))
    if "norm" in keys:
        out["norm"] = dest("norm", (L, H, n, n))
    fnorm = torch.diagonal(plain, dim1=-2, dim2=-1)[..., :H].clamp_min(0).sqrt().transpose(1, 2).contiguous()
    for layer in range(L):
        for gram, scale, d in zip(stage_grams, stage_scales, stage_dests):
            pair_norms_torch(alpha[layer], gram[layer], scale[layer], d[layer])
    if "norm" in out:
        torch.mul(alpha, fnorm[:, :, None, :], out=out["norm"])
    # the diagonal pairs i = j, where x_j enters: c_jᵀ G_j c_j with c_j = (α^1_jj … α^H_jj, 1)
    diag_alpha = torch.diagonal(alpha, dim1=-2, dim2=-1).transpose(1, 2)  # [L, n, H]
    coef = torch.cat([diag_alpha, torch.ones(L, n, 1, dtype=dtype, device=device)], dim=-1)  # [L, n, H+1]
    idx = torch.arange(n, device=device)

    def with_residual(gram: torch.Tensor) -> torch.Tensor:
        return ((gram @ coef.unsqueeze(-1)).squeeze(-1) * coef).sum(-1).clamp_min(0).sqrt()  # [L, n]

    if plain_key:
        out[plain_key] = stage_dests[0]
        if plain_key == "norm_layer" and "attn_res" in keys:
            out["attn_res"] = dest("attn_res", (L, n, n))
            out["attn_res"].copy_(stage_dests[0])
        if "attn_res" in out:
            out["attn_res"][:, idx, idx] = with_residual(plain)
    if "attn_res_ln" in keys:
        out["attn_res_ln"] = stage_dests[-1]
        out["attn_res_ln"][:, idx, idx] = with_residual(weighted) * inv_s
    return {k: out[k] for k in keys}

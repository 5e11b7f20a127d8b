"""The norm family of Kobayashi et al. 2020/2021: norm, norm_layer, attn_res, attn_res_ln.

    norm        ‖α^h_ij f^h_j‖ = α^h_ij ‖f^h_j‖                                 [L, H, n, n]
    norm_layer  ‖Σ_h α^h_ij f^h_j‖ = sqrt(α_ijᵀ G_j α_ij)                        [L, n, n]
    attn_res    ‖Σ_h α^h_ij f^h_j + δ_ij x_j‖: norm_layer off the diagonal        [L, n, n]
    attn_res_ln ‖N(u_ij)‖ / s_i, N = γ⊙centre (LayerNorm) or γ⊙· (RMSNorm)      [L, n, n]

with G_j the Gram matrix of token j's span vectors [f^1_j … f^H_j, x_j] (plain, or under N). The work:
:mod:`.runs` (runs of layers per call), :mod:`.kernels` (compiled CPU kernels), :mod:`.pair_norms` (the
torch version of the pair sums). Which of the two runs is decided once, by :func:`.runs.backend`.
"""

from __future__ import annotations

import torch

from ...core import pool
from .. import papers
from ..base import Inputs, KeyInfo, Output, no_check, to_numpy
from ..family import Family
from .runs import KEYS as _NAMES
from .runs import backend, norm_family_run, runs

check = no_check
FAMILY = Family(
    name="norms",
    order=20,
    keys=(
        KeyInfo(
            "norm", "Norm ‖α f(x)‖", True, "‖α^h_ij f^h(x_j)‖ per head (Kobayashi et al. 2020).", short="‖αf‖ norm"
        ),
        KeyInfo(
            "norm_layer",
            "Norm, heads summed ‖Σ_h α f(x)‖",
            False,
            "‖Σ_h α^h_ij f^h(x_j)‖: head vectors summed, then the norm (2020).",
            short="‖Σαf‖ heads summed",
        ),
        KeyInfo(
            "attn_res",
            "Attention + residual",
            False,
            "‖Σ_h α^h_ij f^h(x_j) + δ_ij x_j‖ (Kobayashi et al. 2021, ATB).",
            short="+ residual",
        ),
        KeyInfo(
            "attn_res_ln",
            "Attention + residual + norm",
            False,
            "The norm after the residual decomposed: ‖γ⊙(u_ij − mean u_ij)‖/s_i (2021, ATBN).",
            short="+ residual + LN",
        ),
    ),
    stacks=("model", "encoder", "decoder"),  # also an encoder–decoder's decoder self-attention
    group="per layer",
    per_layer=True,  # compute() serves any subset of layers: Session.map computes one
    record="attention",  # reads only the attention blocks: a pass may stop after the last one (schedule)
    computed_together=True,  # the stages share the Grams: asking for one key computes them all
    references=(papers.KOBAYASHI_2020, papers.KOBAYASHI_2021),
)


def compute(inputs: Inputs, keys, options) -> Output:
    """The keys asked for, in runs of layers (one kernel call per run on CPU); written straight into the
    result arrays (from :mod:`normviz.core.pool`: reused across analyses of the same size, not faulted in again).
    The `attention` result, when already computed, is the α the runs read."""
    layers = list(inputs.layers)
    keys = [k for k in _NAMES if k in keys]
    L, c0 = len(layers), layers[0]
    H, n = c0.rec.n_heads, c0.n  # (not α's shape: a long input's α would be recomputed just to read it)
    dtype = to_numpy(torch.empty(0, dtype=c0.dtype)).dtype
    out = {k: pool.empty((L, H, n, n) if k == "norm" else (L, n, n), dtype) for k in keys}
    attention = inputs.arrays.get("attention")
    alpha = torch.from_numpy(attention) if attention is not None and c0.device.type == "cpu" else None
    use = backend(layers)
    for run in runs(layers):
        res = norm_family_run(
            layers[run],
            keys,
            use,
            alpha=_mix_alpha(layers[run], alpha[run]) if alpha is not None else None,
            targets={k: torch.from_numpy(out[k][run]) for k in keys},
        )
        for k in keys:  # already in place on CPU; copied from the device elsewhere
            dest = out[k][run]
            if res[k].device.type != "cpu" or res[k].data_ptr() != dest.ctypes.data:
                dest[...] = to_numpy(res[k])
        for ctx in layers[run]:
            ctx.clear()
        if inputs.progress:
            inputs.progress(run.stop / L, f"{FAMILY.name}: layers {run.start + 1}–{run.stop}/{L}")
    c0.workspace.release()
    return Output(out)


def _mix_alpha(ctxs, alpha: torch.Tensor) -> torch.Tensor:
    """The run's mixing weights from its α [L_run, H, n, n] (the computed ``attention`` map, not recomputed): α
    itself, or α^h_ij / s_i where a norm P_a follows the attention (:attr:`LayerDecomposition.mix_alpha`, the same
    product, so the same bits) in one workspace buffer."""
    if ctxs[0].p.attn_out_norm is None:
        return alpha
    ws = ctxs[0].workspace
    scale = ws.buffer("norms_row_scale", (len(ctxs), ctxs[0].n), alpha.dtype, alpha.device)
    for k, c in enumerate(ctxs):
        scale[k] = c.attn_row_scale
    mixed = ws.buffer("norms_mix_alpha", tuple(alpha.shape), alpha.dtype, alpha.device)
    return torch.mul(alpha, scale[:, None, :, None], out=mixed)

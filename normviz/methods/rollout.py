"""Rollout: contributions carried across layers by multiplying per-layer maps (rows = output tokens).

Attention rollout (Abnar & Zuidema 2020), ``rollout_attention``:
    A_l  = mean_h α^h_l                         (head-averaged raw attention of layer l)
    Â_l  = rownorm(0.5·A_l + 0.5·I)             (the residual as an identity; rows sum to 1)
    R_0  = Â_0,  R_l = Â_l · R_{l−1}           (R_l[i, j]: share of input token j in token i after layer l)

Rollout of the norm-based maps (GlobEnc-style), ``rollout_attn_res``, ``rollout_attn_res_ln``,
``rollout_ff_res``, ``rollout_ff_res_ln`` (post-LN only): the per-layer map M_l already contains the
residual, so no identity is added: M̂_l = rownorm(M_l), R_l = M̂_l · R_{l−1}.

Causal models (decoders) see only their prefix, so every rollout drifts toward the first tokens merely
because they are in every receptive field (Abnar & Zuidema 2020, §5). Option
``rollout_normalization="receptive_field"`` corrects for that: with U the uniform causal attention
(U_ij = 1/(i+1) for j ≤ i, the attention of a model that spreads evenly over each token's receptive field)
and B_l its rollout built exactly like R_l (Û = rownorm(0.5·U + 0.5·I) for ``rollout_attention``, U itself for
the others), the corrected map is
    R̃_l[i, j] = (R_l[i, j] / B_l[i, j]) / Σ_k (R_l[i, k] / B_l[i, k])      (j ≤ i)
so that a model that attends uniformly over its receptive field gets uniform rows 1/(i+1), and values are
read relative to that baseline. The default, ``"standard"``, is the paper's rollout. Which one was used is
recorded in ``Analysis.notes[key]``. For encoders the option changes nothing (every token sees all tokens).
"""
from __future__ import annotations

import numpy as np

from ..errors import NormvizError
from .registry import KeyInfo, Method, register

NORMALIZATIONS = ("standard", "receptive_field")

# rollout key -> per-layer key it rolls out
NORM_SOURCES = {
    "rollout_attn_res": "attn_res",
    "rollout_attn_res_ln": "attn_res_ln",
    "rollout_ff_res": "ff_res",
    "rollout_ff_res_ln": "ff_res_ln",
}


def row_normalize(m: np.ndarray) -> np.ndarray:
    """Rows divided by their sums (a row of zeros stays zero)."""
    s = m.sum(-1, keepdims=True)
    return np.divide(m, s, out=np.zeros_like(m), where=s != 0)


def attention_with_residual(attention: np.ndarray) -> np.ndarray:
    """Â_l = rownorm(0.5·mean_h α_l + 0.5·I) for every layer: [L, H, n, n] (or [L, n, n] already averaged) → [L, n, n]."""
    a = attention.mean(1) if attention.ndim == 4 else attention
    n = a.shape[-1]
    return row_normalize(0.5 * a + 0.5 * np.eye(n, dtype=a.dtype))


def rollout(maps: np.ndarray) -> np.ndarray:
    """R_0 = M_0, R_l = M_l · R_{l−1}: cumulative products of [L, n, n] maps (float64 accumulation)."""
    out = np.empty(maps.shape, dtype=np.float64)
    acc = None
    for layer, m in enumerate(maps.astype(np.float64)):
        acc = m if acc is None else m @ acc
        out[layer] = acc
    return out.astype(maps.dtype)


def uniform_causal(n: int, dtype=np.float64) -> np.ndarray:
    """U_ij = 1/(i+1) for j ≤ i: uniform attention over each token's receptive field."""
    return np.tril(np.ones((n, n), dtype=dtype)) / np.arange(1, n + 1, dtype=dtype)[:, None]


def receptive_field_correct(r: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """R̃ = rownorm(R / B) on the causal triangle (entries above the diagonal stay 0)."""
    ratio = np.divide(r, baseline, out=np.zeros_like(r, dtype=np.float64), where=baseline > 0)
    return row_normalize(ratio).astype(r.dtype)


def normalization_option(options: dict) -> str:
    value = str(options.get("rollout_normalization", "standard")).strip().lower().replace("-", "_")
    if value not in NORMALIZATIONS:
        raise NormvizError(
            f"rollout_normalization={value!r} is not known; use one of {', '.join(NORMALIZATIONS)} "
            "(e.g. --option rollout_normalization=receptive_field)."
        )
    return value


def finish(key: str, r: np.ndarray, with_identity: bool, analysis, options: dict) -> np.ndarray:
    """Apply the chosen normalisation to a rollout and record the choice in ``analysis.notes``."""
    mode = normalization_option(options)
    causal = getattr(analysis, "placement", "post") == "pre"
    if mode == "receptive_field" and causal:
        n = r.shape[-1]
        u = uniform_causal(n)
        base_layer = row_normalize(0.5 * u + 0.5 * np.eye(n)) if with_identity else u
        baseline = rollout(np.repeat(base_layer[None], r.shape[0], axis=0))
        note = ("receptive-field normalised: each entry divided by the rollout of uniform causal attention, "
                "rows renormalised (option rollout_normalization=receptive_field)")
        out = np.stack([receptive_field_correct(r[l], baseline[l]) for l in range(r.shape[0])])
    else:
        note = "standard rollout (rows sum to 1)"
        if mode == "receptive_field":
            note += "; receptive_field normalisation ignored: an encoder's tokens all see every token"
        elif causal:
            note += "; for this decoder, --option rollout_normalization=receptive_field corrects the bias to early tokens"
        out = r
    if analysis is not None and hasattr(analysis, "notes"):
        analysis.notes[key] = note
    return out


def _compute_attention(arrays, analysis, keys, options):
    a_hat = attention_with_residual(arrays["attention"])
    return {"rollout_attention": finish("rollout_attention", rollout(a_hat), True, analysis, options)}


def _compute_norm(arrays, analysis, keys, options):
    out = {}
    for key in keys:
        m = row_normalize(arrays[NORM_SOURCES[key]].astype(np.float64))
        out[key] = finish(key, rollout(m), False, analysis, options).astype(arrays[NORM_SOURCES[key]].dtype)
    return out


_OPTION_NOTE = "Decoders: --option rollout_normalization=receptive_field (see normviz.methods.rollout)."

ROLLOUT_ATTENTION = register(Method(
    name="rollout_attention", scope="model", requires=("attention",),
    keys=(KeyInfo("rollout_attention", "Attention rollout", False,
                  "R_l = Â_l·R_{l−1}, Â = rownorm(0.5·mean_h α + 0.5·I), cumulative up to layer l. " + _OPTION_NOTE,
                  rows_sum_to_one=True),),
    compute=_compute_attention,
    cost_note="O(L·n³), negligible",
    references=("Abnar & Zuidema 2020, Quantifying Attention Flow in Transformers",),
))

_NORM_KEYS = {
    "rollout_attn_res": KeyInfo(
        "rollout_attn_res", "Rollout of attention + residual", False,
        "R_l = rownorm(attn_res_l)·R_{l−1} (residual already inside; no identity added). " + _OPTION_NOTE,
        rows_sum_to_one=True),
    "rollout_attn_res_ln": KeyInfo(
        "rollout_attn_res_ln", "Rollout of attention + residual + norm (GlobEnc)", False,
        "R_l = rownorm(attn_res_ln_l)·R_{l−1} (Modarressi et al. 2022, GlobEnc). " + _OPTION_NOTE,
        rows_sum_to_one=True),
    "rollout_ff_res": KeyInfo(
        "rollout_ff_res", "Rollout of feed-forward + residual", False,
        "R_l = rownorm(ff_res_l)·R_{l−1}; for pre-LN models ff_res is the whole layer. " + _OPTION_NOTE,
        rows_sum_to_one=True),
    "rollout_ff_res_ln": KeyInfo(
        "rollout_ff_res_ln", "Rollout of the whole layer (FF + residual + norm)", False,
        "Post-LN only: R_l = rownorm(ff_res_ln_l)·R_{l−1}.", placements=("post",), rows_sum_to_one=True),
}

# one method per key, so that asking for one rollout computes only the per-layer map it needs
for _key, _info in _NORM_KEYS.items():
    register(Method(
        name=_key, scope="model", requires=(NORM_SOURCES[_key],), keys=(_info,), compute=_compute_norm,
        cost_note="O(L·n³) after the per-layer map",
        references=("Modarressi et al. 2022, GlobEnc", "Kobayashi et al. 2021/2024"),
    ))

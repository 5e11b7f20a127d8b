"""Rollout: contributions carried across layers by multiplying per-layer maps (rows = output tokens).

Attention rollout (Abnar & Zuidema 2020), ``rollout_attention``:
    A_l  = mean_h α^h_l                         (head-averaged raw attention of layer l)
    Â_l  = rownorm(0.5·A_l + 0.5·I)             (the residual as an identity; rows sum to 1)
    R_0  = Â_0,  R_l = Â_l · R_{l−1}           (R_l[i, j]: share of input token j in token i after layer l)

Rollout of the norm-based maps, ``rollout_attn_res``, ``rollout_attn_res_ln``,
``rollout_ff_res``, ``rollout_ff_res_ln`` (post-LN only): the per-layer map M_l already contains the
residual, so no identity is added: M̂_l = rownorm(M_l), R_l = M̂_l · R_{l−1}. ``rollout_attn_res_ln`` is the
"norm rollout" of attention + residual + norm, the baseline of Ferrando et al. 2022 (ALTI) — not GlobEnc,
which also splits the second LayerNorm and multiplies raw maps (:mod:`normviz.methods.globenc`).

Value-zeroing rollout, ``rollout_value_zeroing`` (opt-in, as ``value_zeroing``): the same with
M_l = value_zeroing_l, whose rows are already normalised and whose reruns include the residual; no identity
is added — the authors' ``compute_joint_attention(scores, res=False)`` (Mohebbi et al. 2023, github
hmohebbi/ValueZeroing, ``scoring/value_zeroing.py``).

Causal models (decoders) see only their prefix, so every rollout drifts toward the first tokens merely
because they are in every receptive field (Abnar & Zuidema 2020, §5). Option
``rollout_normalization="receptive_field"`` corrects for that: the rollout is divided by the rollout B_l of a
baseline model that attends uniformly over each token's receptive field (U_ij = 1/(i+1) for j ≤ i) and keeps
as much of each token through the residual as the rolled-out model does:
    ``rollout_attention`` (and ``flow``): Û = rownorm(0.5·U + 0.5·I), the same fixed residual half as Â;
    the maps with the residual inside (attn_res*, ff_res*, alti*, value zeroing): per layer and row the model's
        own self share d_li = M̂_l[i, i], the rest spread evenly over the earlier tokens:
        B̂_l[i, i] = d_li, B̂_l[i, j] = (1 − d_li)/i for j < i;
B_l is built from these exactly like R_l, and the corrected map is
    R̃_l[i, j] = (R_l[i, j] / B_l[i, j]) / Σ_k (R_l[i, k] / B_l[i, k])      (j ≤ i)
so that a model that spreads its mixing evenly over its receptive field gets uniform rows 1/(i+1), and values
are read relative to that baseline. A baseline of uniform attention alone (no residual) would leave the
diagonal of a deep decoder's residual-heavy rollout divided by (i+1)^−L: smollm2's last row then gave 0.99 of
its weight to itself. The diagonal of a causal product is the product of the diagonals, so with the matched
self share the diagonal ratio is exactly 1. Baseline entries that underflow (< 1e-290) leave their cell at 0,
and the note says how many. The default, ``"standard"``, is the paper's rollout. Which one was used is stated
in ``Analysis.notes[key]``. For encoders the option changes nothing (every token sees all tokens).
"""

from __future__ import annotations

import numpy as np

from ..core.errors import NormvizError
from . import papers
from .base import Inputs, KeyInfo, Output, Request
from .family import Family

NORMALIZATIONS = ("standard", "receptive_field")

# rollout key -> per-layer key it rolls out
NORM_SOURCES = {
    "rollout_attn_res": "attn_res",
    "rollout_attn_res_ln": "attn_res_ln",
    "rollout_ff_res": "ff_res",
    "rollout_ff_res_ln": "ff_res_ln",
    "rollout_value_zeroing": "value_zeroing",
}


def row_normalize(m: np.ndarray) -> np.ndarray:
    """Rows divided by their sums (a row of zeros stays zero)."""
    s = m.sum(-1, keepdims=True)
    return np.divide(m, s, out=np.zeros_like(m), where=s != 0)


def attention_with_residual(attention: np.ndarray) -> np.ndarray:
    """Â_l = rownorm(0.5·mean_h α_l + 0.5·I) for every layer: [L, H, n, n] (or [L, n, n] already averaged) → [L, n,
    n]."""
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


def uniform_with_residual(n: int) -> np.ndarray:
    """Û = rownorm(0.5·U + 0.5·I): the baseline layer of ``rollout_attention`` and ``flow``."""
    return row_normalize(0.5 * uniform_causal(n) + 0.5 * np.eye(n))


def matched_baseline(maps: np.ndarray) -> np.ndarray:
    """B̂_l per layer of row-normalised causal maps [L, n, n]: each row's own self share d_li on the diagonal, the
    rest 1 − d_li spread evenly over the i earlier tokens."""
    maps = np.asarray(maps, dtype=np.float64)
    n = maps.shape[-1]
    d = np.diagonal(maps, axis1=-2, axis2=-1)  # [L, n]
    earlier = np.maximum(np.arange(n, dtype=np.float64), 1.0)  # i (row 0 has no earlier token)
    out = np.tril(np.ones((n, n)), -1)[None] * ((1.0 - d) / earlier)[:, :, None]
    idx = np.arange(n)
    out[:, idx, idx] = d
    out[:, 0, 0] = 1.0
    return out


UNDERFLOW = 1e-290


def receptive_field_correct(r: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """R̃ = rownorm(R / B) on the causal triangle (entries above the diagonal, and where B underflows, stay 0)."""
    ratio = np.divide(r, baseline, out=np.zeros_like(r, dtype=np.float64), where=baseline > UNDERFLOW)
    return row_normalize(ratio).astype(r.dtype)


def normalization_option(options: dict) -> str:
    value = str(options.get("rollout_normalization", "standard")).strip().lower().replace("-", "_")
    if value not in NORMALIZATIONS:
        raise NormvizError(
            f"rollout_normalization={value!r} is not known; use one of {', '.join(NORMALIZATIONS)} "
            "(e.g. --option rollout_normalization=receptive_field)."
        )
    return value


def receptive_field(r: np.ndarray, baseline: np.ndarray, what: str) -> tuple[np.ndarray, str]:
    """The corrected maps [L, n, n] of ``r`` against the baseline rollout, and the note that says so."""
    causal = np.tril(np.ones(r.shape[-2:], dtype=bool))
    lost = int(((baseline <= UNDERFLOW) & causal & (r != 0)).sum())
    note = (
        f"receptive-field normalised: each entry divided by the rollout of {what}, rows renormalised "
        "(option rollout_normalization=receptive_field)"
    )
    if lost:
        note += f"; warning: {lost} baseline entries underflow (< {UNDERFLOW:g}), their cells are left at 0"
    return np.stack([receptive_field_correct(r[l], baseline[l]) for l in range(r.shape[0])]), note


def finish(
    r: np.ndarray, with_identity: bool, causal: bool, options: dict, maps: np.ndarray | None = None
) -> tuple[np.ndarray, str]:
    """Apply the chosen normalisation to a rollout; returns it with a note saying which one. ``maps``: the
    row-normalised per-layer maps rolled out (needed for the residual-inside baseline, ``with_identity=False``)."""
    mode = normalization_option(options)
    if mode == "receptive_field" and causal:
        n = r.shape[-1]
        if with_identity or maps is None:
            layers = np.repeat(uniform_with_residual(n)[None], r.shape[0], axis=0)
            what = "uniform causal attention with the residual half (rownorm(0.5·U + 0.5·I))"
        else:
            layers = matched_baseline(maps)
            what = (
                "uniform causal attention that keeps each token's own self share of these maps "
                "(the residual), layer by layer"
            )
        return receptive_field(r, rollout(layers), what)
    note = "standard rollout (rows sum to 1)"
    if mode == "receptive_field":
        note += "; receptive_field normalisation ignored: an encoder's tokens all see every token"
    elif causal:
        note += "; for this decoder, --option rollout_normalization=receptive_field corrects the bias to early tokens"
    return r, note


def layer_step(key: str, layer_map: np.ndarray) -> np.ndarray:
    """One layer's factor of the rollout ``key`` from that layer's map (float64): Â = rownorm(0.5·A + 0.5·I) of
    the head-mean α for ``rollout_attention``, rownorm(M) otherwise."""
    if key == "rollout_attention":
        return attention_with_residual(layer_map[None])[0].astype(np.float64)
    return row_normalize(layer_map.astype(np.float64))


def one_at_a_time(key: str, layer_map, start: np.ndarray | None, first: int, layer: int) -> np.ndarray:
    """R_layer with one [n, n] product at a time (standard normalisation): from R_{first−1} = ``start`` (None:
    from layer 0), R_k = step(layer_map(k))·R_{k−1}; float64. ``layer_map(k)``: layer k's per-layer map."""
    acc = start
    for k in range(first, layer + 1):
        m = layer_step(key, layer_map(k))
        acc = m if acc is None else m @ acc
    return acc


def per_layer_source(key: str) -> str | None:
    """The per-layer key whose maps ``key``'s rollout multiplies (``attention`` for the attention rollout), or
    None for a rollout that needs a whole cross-layer array (value zeroing)."""
    if key == "rollout_attention":
        return "attention"
    return None if key == "rollout_value_zeroing" else NORM_SOURCES.get(key)


def chain_source(key: str, options: dict) -> str | None:
    """The per-layer key whose layer maps ``key``'s layer l multiplies one [n, n] product at a time
    (:func:`one_at_a_time`; the one-layer path, :mod:`normviz.session.layer_maps`), or None (the whole array is needed:
    value zeroing, or a normalisation other than the standard one)."""
    source = per_layer_source(key)
    return source if source is not None and normalization_option(options) == "standard" else None


_OPTION_NOTE = "Decoders: --option rollout_normalization=receptive_field (see normviz.methods.rollouts)."

FAMILY = Family(
    name="rollouts",
    order=40,
    keys=(
        KeyInfo(
            "rollout_attention",
            "Attention rollout",
            False,
            "R_l = Â_l·R_{l−1}, Â = rownorm(0.5·mean_h α + 0.5·I), cumulative up to layer l. " + _OPTION_NOTE,
            short="α rollout",
        ),
        KeyInfo(
            "rollout_attn_res",
            "Rollout of attention + residual",
            False,
            "R_l = rownorm(attn_res_l)·R_{l−1} (residual already inside; no identity added). " + _OPTION_NOTE,
            short="+ residual",
        ),
        KeyInfo(
            "rollout_attn_res_ln",
            "Rollout of attention + residual + norm",
            False,
            "R_l = rownorm(attn_res_ln_l)·R_{l−1}: the norm rollout of the attention block with residual and "
            'norm (the "norm rollout" baseline of Ferrando et al. 2022; not GlobEnc, see globenc). ' + _OPTION_NOTE,
            short="+ residual + LN",
        ),
        KeyInfo(
            "rollout_ff_res",
            "Rollout of feed-forward + residual",
            False,
            "R_l = rownorm(ff_res_l)·R_{l−1}; for pre-LN models ff_res is the whole layer. " + _OPTION_NOTE,
            short="FF + residual",
        ),
        KeyInfo(
            "rollout_ff_res_ln",
            "Rollout of the whole layer (FF + residual + norm)",
            False,
            "Post-LN only: R_l = rownorm(ff_res_ln_l)·R_{l−1}.",
            placements=("post",),
            short="whole layer",
        ),
        KeyInfo(
            "rollout_value_zeroing",
            "Value-zeroing rollout",
            False,
            "R_l = value_zeroing_l·R_{l−1} (rows normalised, no identity), as Mohebbi et al. 2023 compute it. "
            "Opt-in: needs value_zeroing (n+1 reruns of every layer).",
            short="value zeroing",
        ),
    ),
    group="across layers",
    unit="score (rows sum to ~1)",
    requires={"rollout_attention": ("attention",), **{k: (v,) for k, v in NORM_SOURCES.items()}},
    opt_in=("rollout_value_zeroing",),
    references=(
        papers.ABNAR_2020,
        papers.FERRANDO_2022,
        papers.KOBAYASHI_2021,
        papers.KOBAYASHI_2024,
        papers.MOHEBBI_2023,
    ),
)


def check(request: Request, key: str, options: dict) -> None:
    normalization_option(options)  # an unknown option value is refused before the forward pass


def compute(inputs: Inputs, keys, options) -> Output:
    arrays, notes = {}, {}
    causal = inputs.request.causal
    for key in keys:
        if key == "rollout_attention":
            a_hat = attention_with_residual(inputs.arrays["attention"])
            arrays[key], notes[key] = finish(rollout(a_hat), True, causal, options)
        else:
            src = inputs.arrays[NORM_SOURCES[key]]
            maps = row_normalize(src.astype(np.float64))
            r, notes[key] = finish(rollout(maps), False, causal, options, maps=maps)
            arrays[key] = r.astype(src.dtype)
    return Output(arrays, notes)

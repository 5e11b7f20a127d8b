"""The shown panels at every layer (and head), for the browser to switch between without a server round trip.

A layer or head change on Explore is drawn in the browser from these frames as soon as the control moves
(``normviz.ui.kit.instant``, script ``components/instant_switch.js``); the page's rerun then draws the same numbers from
the server. A frame holds
exactly what the heatmap of that layer/head would show: ``data.build_panels`` (hidden specials, row shares),
``data.color_range`` (per panel or shared), ``data.thresholded``, the causal mask, the colour scale and the
title. Values travel at 4 significant digits, as the hover prints them; CSV/NPZ exports keep full precision.

Frames are named ``"<layer>:<head>"`` (head −1 = all heads): every layer at the current head and every head
view at the current layer, so data grow as (L + H)·n², not L·H·n². They are offered within a cell budget
(``NORMVIZ_INSTANT_CELLS``, default 250,000 cells, about 1.7 MB of JSON sent with each rerun: on minilm's
4 default panels, layers and heads up to 58 tokens, layers alone up to 100), else for the layers alone,
else not at all (then every change is drawn by the server).
"""

from __future__ import annotations

import numpy as np

from ...viz.heatmap import causal_mask, colorscale_for
from ...viz.labels import plotly_text
from . import data

DEFAULT_BUDGET = 250_000


def frame_name(layer: int, head: int | None) -> str:
    return f"{int(layer)}:{-1 if head is None else int(head)}"


def budget() -> int:
    from ...core import settings

    return settings.env("NORMVIZ_INSTANT_CELLS")


def plan(
    n_shown: int,
    n_panels: int,
    n_layers: int,
    head_views: list[int | None],
    layer: int,
    head: int | None,
    limit: int | None = None,
) -> list[tuple[int, int | None]]:
    """The (layer, head) frames to send: every layer at ``head`` and every head view at ``layer`` (the
    next layer or head change is then drawn in the browser; the rerun re-centres them) when that fits
    ``limit`` cells, else every layer at ``head``, else none."""
    limit = budget() if limit is None else limit
    per_frame = n_panels * n_shown * n_shown
    layers = [(ell, head) for ell in range(n_layers)]
    both = layers + [(layer, h) for h in head_views if h != head]
    for wanted in (both, layers):
        if per_frame * len(wanted) <= limit:
            return wanted
    return []


def compact(m: np.ndarray, digits: int = 4) -> list:
    """``m`` as nested lists at ``digits`` significant digits (what the hover prints); NaN → None."""
    m = np.asarray(m, dtype=np.float64)
    finite = np.isfinite(m)
    out = np.zeros(m.shape)
    nonzero = finite & (m != 0)
    mag = np.floor(np.log10(np.abs(m[nonzero])))
    scale = 10.0 ** (digits - 1 - mag)
    out[nonzero] = np.round(m[nonzero] * scale) / scale
    shown = out.astype(object)  # Python floats; one C-level tolist instead of a float() per cell
    shown[~finite] = None
    return shown.tolist()


def panel_frames(
    analysis,
    keys: list[str],
    frames: list[tuple[int, int | None]],
    *,
    hide_special: bool,
    values: str,
    shared_scale: bool,
    threshold: float,
    causal: bool,
) -> dict[str, dict[str, dict]]:
    """{map key: {frame name: {"restyle": {z, zmin, zmax, colorscale, zmid}, "title"}}} of the heatmap panels
    at the ``frames`` (layer, head)."""
    from .memo import memoised

    present = [k for k in keys if k in analysis]
    out: dict[str, dict[str, dict]] = {k: {} for k in present}
    if not present:
        return out
    owner = analysis.arrays[present[0]]  # one session's maps: the frames of a view are computed once
    options = (
        tuple(present),
        tuple(id(analysis.arrays[k]) for k in present),
        hide_special,
        values,
        shared_scale,
        threshold,
        causal,
        np.asarray(analysis.special, bool).tobytes(),
    )
    for layer, head in frames:
        one = memoised(
            owner,
            ("frame", layer, head) + options,
            lambda: _one_frame(analysis, present, layer, head, hide_special, values, shared_scale, threshold, causal),
        )
        for k, f in one.items():
            out[k][frame_name(layer, head)] = f
    return out


def _one_frame(analysis, keys, layer, head, hide_special, values, shared_scale, threshold, causal) -> dict:
    """{map key: frame} of the panels at one (layer, head)."""
    out = {}
    panels = data.build_panels(analysis, keys, layer, head, hide_special, values)
    ranges = data.color_range(panels, shared_scale)
    for p, (lo, hi) in zip(panels, ranges):
        m = data.thresholded(p.matrix, threshold)
        if causal and m.shape[0] == m.shape[1]:
            m = np.where(causal_mask(p.index, p.index), np.nan, m)
        scale, zmid = colorscale_for(lo)
        out[p.key] = dict(
            restyle=dict(z=[compact(m)], zmin=[lo], zmax=[hi], colorscale=[scale], zmid=[zmid]),
            title=plotly_text(p.title),
        )
    return out


def fx_frames(norms_of_layer, keep: list[int], frames: list[tuple[int, int | None]]) -> dict[str, dict]:
    """{frame name: {"restyle": {y}, "title"}} of a ‖f(x_j)‖ strip (``data.fx_strip``); ``norms_of_layer(l)``
    gives ``normviz.transformed_norms`` of layer l ([H, n])."""
    out, norms = {}, {}
    for layer, head in frames:
        if layer not in norms:
            norms[layer] = norms_of_layer(layer)
        vals, title = data.fx_strip(norms[layer], head, keep)
        out[frame_name(layer, head)] = dict(restyle=dict(y=[compact(vals[None, :])[0]]), title=plotly_text(title))
    return out

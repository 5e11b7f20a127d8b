"""Colour scales for a long map's overview, where one column (the first token's, an attention sink) can take
most of every row and leave the rest one dark colour on a linear scale.

Each scale maps the overview's block values ``v`` [blocks_r, blocks_c] (NaN: masked) to the numbers drawn, and
says what it did in words for the figure's title:

- ``linear``: ``v`` itself, on the panels' colour scale (shared or per panel, as the page says);
- ``rest``: each row's share without its first block column, ``v[r, c] / Σ_{c' ≥ 1} |v[r, c']|`` for c ≥ 1 (the
  first column left blank), so the rest of the row is spread over the whole scale (up to the shares' 99th
  percentile: a decoder's first rows, of one or two cells, would take the top otherwise);
- ``log``: ``log10 v`` over the decades below the largest value (values under ``max · 10^-DECADES`` sit at the
  bottom); non-negative maps only (a signed map keeps ``linear``, said so);
- ``quantile``: each cell's rank among the finite cells, ``(rank) / (count − 1)`` in [0, 1]: equal areas of every
  colour whatever the distribution.
"""

from __future__ import annotations

import numpy as np

SCALES = ("linear", "rest", "log", "quantile")
NAMES = {
    "linear": "linear scale",
    "rest": "row share without the first column",
    "log": "log scale",
    "quantile": "quantile scale",
}
DECADES = 4
TOP_PERCENTILE = 99


def rescale(values: np.ndarray, scale: str, zmin: float, zmax: float) -> tuple[np.ndarray, float, float, str, str]:
    """(z to draw, its zmin, zmax, the scale in words for the title, the colour bar's unit suffix) of block values
    ``values`` under ``scale`` (one of :data:`SCALES`); ``zmin``/``zmax``: the linear range the page chose."""
    v = np.asarray(values, np.float64)
    finite = np.isfinite(v)
    if scale not in SCALES:
        raise ValueError(f"unknown overview scale {scale!r}: use one of {', '.join(SCALES)}")
    if scale == "linear" or not finite.any():
        return v, zmin, zmax, NAMES["linear"], ""
    signed = bool((v[finite] < 0).any())
    if scale == "rest":
        out = np.full_like(v, np.nan)
        if v.shape[1] > 1:
            total = np.nansum(np.abs(v[:, 1:]), axis=1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[:, 1:] = np.where(total > 0, v[:, 1:] / total, np.nan)
        ok = np.isfinite(out)
        # the 99th percentile, not the max: a decoder's first rows have one or two cells, whose shares near 1
        # would again leave every longer row one colour (cells above it show the top colour)
        hi = float(np.percentile(np.abs(out[ok]), TOP_PERCENTILE)) if ok.any() else 1.0
        return out, (-hi if signed else 0.0), (hi if hi > 0 else 1.0), NAMES["rest"], " (of the row's rest)"
    if scale == "log":
        if signed:
            return v, zmin, zmax, "linear scale (a signed map has no log scale)", ""
        top = float(np.nanmax(v))
        if top <= 0:
            return v, zmin, zmax, NAMES["linear"], ""
        floor = top * 10.0**-DECADES
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(finite, np.log10(np.maximum(v, floor)), np.nan)
        return out, float(np.log10(floor)), float(np.log10(top)), NAMES["log"], " (log10)"
    ranks = np.full_like(v, np.nan)
    flat = v[finite]
    order = np.argsort(np.argsort(flat, kind="stable"), kind="stable")
    ranks[finite] = order / max(len(flat) - 1, 1)
    return ranks, 0.0, 1.0, NAMES["quantile"], " (quantile)"


__all__ = ["DECADES", "NAMES", "SCALES", "rescale"]

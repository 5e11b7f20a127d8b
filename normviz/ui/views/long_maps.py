"""Explore on a long text (more than :data:`LONG_TOKENS` tokens): what the long view shows, without Streamlit.

A long map is not drawn cell by cell. Each panel is an overview at screen resolution
(:func:`normviz.viz.overview.overview`: every cell the max or the mean of the block of tokens under it) and a
zoom window at full resolution. The maps come one layer at a time from :meth:`normviz.Session.maps` (never the
whole [L, …] arrays), all shown keys of a layer in one pass over its records.

A panel's numbers are those of the short view (:func:`normviz.ui.kit.data.shown_matrix`): special tokens hidden
when asked, rows as shares of their total. They are written as ``factor[i] · m[keep_i, keep_j]`` of the
layer's map m, so a zoom window is cut from the session's cached map without redoing the whole matrix:

- shares: factor_i = 1 / Σ_{j ∈ keep} |m_ij|;
- raw, specials hidden: factor_i = Σ_j |m_ij| / Σ_{j ∈ keep} |m_ij| (the row keeps its total);
- raw: factor_i = 1.

Positions: ``keep`` lists the original token positions of the shown rows and columns; the overview's blocks
and the window's ranges are indices into it (:func:`shown_index` converts a token position).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...core.errors import InputError
from ...session import long_layers
from ...viz.overview import Overview, clip_range, overview
from ..kit import data

LONG_TOKENS = 256  # above this many tokens Explore draws overviews and a zoom window
WINDOW = 64  # tokens of the zoom window at first
MAX_WINDOW = 256  # the full-resolution window's largest side (a heatmap of 256² cells stays quick)
AGGREGATES = ("max", "mean")


def is_long(n_tokens: int) -> bool:
    return int(n_tokens) > LONG_TOKENS


OVERVIEW_CELLS = 256  # the most blocks a side: at least one per pixel of a panel two to a row on a 1280 px window


def overview_cells(width_px: int | None) -> int:
    """Blocks per axis of an overview drawn ``width_px`` wide: about one per pixel of its plot (the labels
    and colour bar take ~170 px), between 96 and :data:`OVERVIEW_CELLS` (a wider panel gets cells of a few
    pixels: each still the max or mean of its tokens, and the figure a quarter of 512 a side's to send and draw)."""
    return int(min(OVERVIEW_CELLS, max(96, (width_px or 600) - 170)))


@dataclass(frozen=True)
class LongPanel:
    key: str
    title: str
    overview: Overview  # of the shown matrix (indices into ``keep``)
    keep: np.ndarray  # original positions of the shown rows / columns
    factor: np.ndarray  # [len(keep)] row factor: shown = factor[:, None] * m[keep][:, keep]
    matrix: np.ndarray  # the layer's map as Session.maps gave it (the session's cached array; read only)

    def window(self, rows: tuple[int, int], cols: tuple[int, int]) -> tuple[np.ndarray, slice, slice]:
        """The shown values of rows × cols (indices into ``keep``, clipped) at full resolution."""
        rs, cs = clip_range(rows, len(self.keep)), clip_range(cols, len(self.keep))
        sub = np.asarray(self.matrix)[np.ix_(self.keep[rs], self.keep[cs])].astype(np.float64)
        return sub * self.factor[rs, None], rs, cs

    def row(self, index: int) -> np.ndarray:
        """Shown row ``index`` (an index into ``keep``): the focus token's row over every shown token."""
        return np.asarray(self.matrix)[self.keep[index], self.keep].astype(np.float64) * self.factor[index]


def row_factors(m: np.ndarray, keep: np.ndarray, values: str) -> np.ndarray:
    """The per-row factor that turns m[keep][:, keep] into the shown rows (module docstring)."""
    hidden = len(keep) < m.shape[1]
    signed = m.size > 0 and m.min() < 0  # |m| = m for the non-negative maps (norms, α): no copy of it

    def magnitude(a):
        return np.abs(a) if signed else a

    sub = magnitude(m[np.ix_(keep, keep)] if hidden else m).sum(-1, dtype=np.float64)
    if values == "share":
        return np.divide(1.0, sub, out=np.zeros_like(sub), where=sub > 0)
    if hidden:
        full = magnitude(m[keep]).sum(-1, dtype=np.float64)
        return np.divide(full, sub, out=np.zeros_like(sub), where=sub > 0)
    return np.ones(len(keep))


def kept_positions(special: np.ndarray, hide_special: bool) -> np.ndarray:
    keep = np.flatnonzero(~np.asarray(special, bool)) if hide_special else np.arange(len(special))
    return keep if len(keep) else np.arange(len(special))


# the worker-or-local decision for a long text's layer is the session's (normviz.session.long_layers); these
# names stay here for the views and tests that asked this module
layer_maps, remote, remote_maps = long_layers.layer_maps, long_layers.in_worker, long_layers.remote_maps


def long_panel(
    session,
    key: str,
    m: np.ndarray,
    layer: int,
    head: int | None,
    hide_special: bool,
    values: str,
    cells: int,
    causal: bool,
) -> LongPanel:
    """The panel of ``key``'s map ``m`` of one layer: the overview of its shown values and what cuts windows."""
    from ..kit.memo import memoised

    special = np.asarray(session.encoded.special, bool)

    def compute():
        keep = kept_positions(special, hide_special)
        factor = row_factors(m, keep, values)
        sub = m[np.ix_(keep, keep)] if len(keep) < m.shape[0] else m
        ov = overview(sub, cells, causal=causal, row_factor=factor)  # the blocks of factor · sub (never made)
        return ov.max, ov.mean, ov.row_edges, ov.col_edges, keep, factor

    mx, mean, re_, ce, keep, factor = memoised(
        m, ("long", hide_special, values, cells, causal, special.tobytes()), compute
    )
    return LongPanel(key, data.panel_title(key, layer, head), Overview(mx, mean, re_, ce), keep, factor, m)


def long_panels(
    session,
    keys: list[str],
    layer: int,
    head: int | None,
    hide_special: bool,
    values: str,
    cells: int,
    causal: bool,
    progress=None,
) -> tuple[list[LongPanel], dict[str, str]]:
    """The panels of ``keys`` at ``layer``/``head`` and the refusals, in the order of ``keys``."""
    maps, refused = layer_maps(session, keys, layer, head, progress)
    panels = [
        long_panel(session, k, maps[k], layer, head, hide_special, values, cells, causal) for k in keys if k in maps
    ]
    return panels, refused


def color_ranges(panels: list[LongPanel], aggregate: str, shared: bool) -> list[tuple[float, float]]:
    """(zmin, zmax) per panel from its overview (a block max holds every cell's extreme, so the window's cells
    fit in it too), one range per :func:`normviz.ui.kit.data.scale_group` when shared; symmetric for signed maps."""

    def rng(arrays):
        lo = min(float(np.nanmin(a)) if np.isfinite(a).any() else 0.0 for a in arrays)
        hi = max(float(np.nanmax(a)) if np.isfinite(a).any() else 0.0 for a in arrays)
        if lo < 0:
            r = max(abs(lo), abs(hi))
            return -r, r
        return 0.0, hi if hi > 0 else 1.0

    own = [rng([p.overview.max]) for p in panels]  # the max blocks bound the mean blocks too
    if not shared:
        return own
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(panels):
        groups.setdefault(data.scale_group(p.key), []).append(i)
    out = list(own)
    for members in groups.values():
        r = rng([panels[i].overview.max for i in members])
        for i in members:
            out[i] = r
    return out


# ---- the zoom window: typed ranges, search, centring ----------------------------------------------------


def shown_index(keep: np.ndarray, position: int) -> int:
    """The shown index of token ``position`` (a hidden special: the next shown token)."""
    return int(min(np.searchsorted(keep, int(position)), len(keep) - 1))


def centred(index: int, n: int, size: int = WINDOW) -> tuple[int, int]:
    """A window of ``size`` (at most n) indices around ``index``, inside 0 … n."""
    size = max(1, min(int(size), n))
    start = min(max(0, int(index) - size // 2), n - size)
    return start, start + size


def clamp_window(r: tuple[int, int], n: int) -> tuple[int, int]:
    """``r`` inside 0 … n, non-empty, at most :data:`MAX_WINDOW` long (cut at its end)."""
    a = min(max(0, int(r[0])), n - 1)
    b = min(max(a + 1, int(r[1])), n, a + MAX_WINDOW)
    return a, b


_RANGE = re.compile(r"^\s*(\d+)\s*(?:-|–|\.\.|…|:)\s*(\d+)\s*$")


def parse_range(text: str, n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """A typed token range: ``"1200-1264"`` (rows and columns the same), ``"1200-1264 / 0-64"`` (rows / columns),
    ends inclusive, positions 0 … n − 1, at most :data:`MAX_WINDOW` tokens a side. InputError says what is
    wrong and what to type."""
    parts = [p for p in str(text).split("/")]
    if not 1 <= len(parts) <= 2:
        raise InputError(_range_help(text, n))
    out = []
    for p in parts:
        m = _RANGE.match(p)
        if not m:
            raise InputError(_range_help(text, n))
        a, b = int(m.group(1)), int(m.group(2))
        if a > b:
            a, b = b, a
        if a >= n:
            raise InputError(f"Token {a} is past the end: the text has {n:,} tokens (0 … {n - 1:,}).")
        b = min(b, n - 1)
        if b - a + 1 > MAX_WINDOW:
            raise InputError(
                f"{a}-{b} is {b - a + 1:,} tokens: the zoom window shows at most {MAX_WINDOW} a side "
                f"(the overview shows the whole text)."
            )
        out.append((a, b + 1))
    return out[0], out[-1]


def _range_help(text: str, n: int) -> str:
    shown = text if len(text) <= 40 else text[:40] + "…"
    return (
        f"{shown!r} is not a token range. Type two positions, e.g. 1200-1264 (rows and columns), or "
        f"1200-1264 / 0-64 (rows / columns); positions 0 … {n - 1:,}."
    )


def _plain_token(label: str) -> str:
    """A token's text for searching: without the tokenizers' word markers (Ġ, ▁, ##) and the ·2 occurrence mark."""
    label = re.sub(r"·\d+$", "", label)
    return label.replace("Ġ", "").replace("▁", "").removeprefix("##").strip().lower()


def find_tokens(labels: list[str], query: str, limit: int = 500) -> list[int]:
    """Positions of the tokens whose text holds ``query`` (case-insensitive; whole-token matches first), at
    most ``limit``; a query of only digits also finds that position."""
    q = str(query).strip().lower().replace("Ġ", "").replace("▁", "")
    if not q:
        return []
    plain = [_plain_token(x) for x in labels]
    exact = [i for i, t in enumerate(plain) if t == q]
    partial = [i for i, t in enumerate(plain) if q in t and t != q]
    found = exact + partial
    if q.isdigit() and int(q) < len(labels) and int(q) not in found:
        found.insert(0, int(q))
    return found[:limit]


__all__ = [
    "AGGREGATES",
    "LONG_TOKENS",
    "LongPanel",
    "MAX_WINDOW",
    "WINDOW",
    "centred",
    "clamp_window",
    "color_ranges",
    "find_tokens",
    "is_long",
    "kept_positions",
    "layer_maps",
    "long_panel",
    "long_panels",
    "remote",
    "remote_maps",
    "OVERVIEW_CELLS",
    "overview_cells",
    "parse_range",
    "row_factors",
    "shown_index",
]

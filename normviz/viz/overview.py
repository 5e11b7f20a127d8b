"""A long map at screen resolution: each overview cell aggregates the block of tokens under it.

    overview(m, cells, causal) → Overview(max, mean, edges)   m [rows, cols] → at most cells × cells blocks
    zoom(m, rows, cols)        → the map's full-resolution window (token ranges, clipped to the map)

Block b covers tokens edges[b] … edges[b + 1] − 1 (blocks differ by at most one token). ``max`` is the cell
of largest magnitude in the block, with its sign (the block maximum for a non-negative map): a single sharp
contribution survives. ``mean`` is the block's average over the cells that exist; with ``causal`` (a decoder:
column j > row i is masked) the cells above the diagonal are left out of both, so a block that straddles the
diagonal averages only its visible cells, and a block wholly above it is NaN (drawn as masked). A figure
says which aggregate it shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Overview:
    max: np.ndarray  # [blocks_r, blocks_c]
    mean: np.ndarray
    row_edges: np.ndarray  # [blocks_r + 1] token index where each block starts (and the end)
    col_edges: np.ndarray

    def block_of(self, token: int, axis: int = 0) -> int:
        """The block (row axis 0, column axis 1) that holds ``token``."""
        edges = self.row_edges if axis == 0 else self.col_edges
        return int(np.searchsorted(edges, token, side="right") - 1)

    def of(self, aggregate: str) -> np.ndarray:
        """``max`` or ``mean``."""
        if aggregate not in ("max", "mean"):
            raise ValueError(f"aggregate must be 'max' or 'mean', not {aggregate!r}")
        return self.max if aggregate == "max" else self.mean


def edges(n: int, cells: int) -> np.ndarray:
    """Block boundaries of n tokens in at most ``cells`` blocks of (nearly) equal size."""
    blocks = max(1, min(int(cells), n))
    return np.linspace(0, n, blocks + 1).round().astype(np.int64)


def visible_counts(re: np.ndarray, ce: np.ndarray) -> np.ndarray:
    """[blocks_r, blocks_c] number of cells with column ≤ row in each block (a causal map's visible cells)."""
    rows = np.arange(int(re[-1]))[:, None]
    per_row = np.clip(rows + 1 - ce[None, :-1], 0, np.diff(ce)[None, :])  # [n_rows, blocks_c]
    return np.add.reduceat(per_row, re[:-1], axis=0)


def overview(m: np.ndarray, cells: int = 512, causal: bool = False, row_factor: np.ndarray | None = None) -> Overview:
    """Block max (largest magnitude, signed) and block mean of ``m`` (NaN-free [rows, cols]) in at most
    ``cells`` blocks per axis; ``causal``: cells above the diagonal are left out. ``row_factor`` [rows] (≥ 0):
    the blocks of ``row_factor[:, None] * m`` (in m's dtype), without making that matrix. A map that already
    fits keeps its values (blocks of one token; masked cells NaN when ``causal``).

    One pass over the map, a block of rows at a time (the block's rows scaled, reduced over the rows, then over
    the column blocks: the block stays in cache); ``causal``: a block of rows reads only the columns up to its
    last row, and only the blocks that straddle the diagonal (about two per block row) are recomputed with their
    masked cells left out."""
    m = np.asarray(m)
    dt = m.dtype if m.dtype.kind == "f" else np.dtype(np.float64)
    re, ce = edges(m.shape[0], cells), edges(m.shape[1], cells)
    f = None if row_factor is None else np.asarray(row_factor).astype(dt)
    # a map without negative cells (every norm, α, their shares): the block min never outweighs the max
    signed = m.size > 0 and m.min() < 0
    hi = np.full((len(re) - 1, len(ce) - 1), -np.inf, dt)
    lo = np.full_like(hi, np.inf) if signed else None
    total = np.zeros(hi.shape, np.float64)
    for bi in range(len(re) - 1):
        r0, r1 = int(re[bi]), int(re[bi + 1])
        width = min(m.shape[1], r1) if causal else m.shape[1]  # causal: later columns are masked in every row
        nc = int(np.searchsorted(ce[:-1], width, side="left"))  # column blocks that start before it
        if nc == 0:
            continue
        t = m[r0:r1, :width]
        if f is not None:
            t = t * f[r0:r1, None]
        starts = ce[:nc]
        hi[bi, :nc] = np.maximum.reduceat(t.max(0), starts)
        if signed:
            lo[bi, :nc] = np.minimum.reduceat(t.min(0), starts)
        # a block's few rows summed in the map's dtype, the blocks' columns in float64 (float32's own
        # precision, about 1e-7 relative, on a float32 map)
        total[bi, :nc] = np.add.reduceat(t.sum(0).astype(np.float64), starts)
    if causal:
        counts = visible_counts(re, ce)
        for bi in range(len(re) - 1):
            r0, r1 = int(re[bi]), int(re[bi + 1])
            # column blocks with a cell above the diagonal (c > r) and one on or below it (c <= r)
            first = int(np.searchsorted(ce, r0, side="right") - 1)
            last = int(np.searchsorted(ce, r1 - 1, side="right") - 1)
            for bj in range(max(first, 0), min(last, len(ce) - 2) + 1):
                c0, c1 = int(ce[bj]), int(ce[bj + 1])
                if c1 - 1 <= r0:  # wholly on or below the diagonal
                    continue
                vis = np.arange(c0, c1)[None, :] <= np.arange(r0, r1)[:, None]
                if not vis.any():
                    continue
                sub = m[r0:r1, c0:c1]
                if f is not None:
                    sub = sub * f[r0:r1, None]
                hi[bi, bj] = sub[vis].max()
                if signed:
                    lo[bi, bj] = sub[vis].min()
                total[bi, bj] = sub[vis].sum(dtype=np.float64)
    else:
        counts = np.diff(re)[:, None] * np.diff(ce)[None, :]
    empty = counts == 0
    mx = hi if not signed else np.where(np.abs(lo) > np.abs(hi), lo, hi)
    mx = np.where(empty, np.nan, mx).astype(dt)
    mean = np.where(empty, np.nan, total / np.maximum(counts, 1)).astype(mx.dtype)
    return Overview(max=mx, mean=mean, row_edges=re, col_edges=ce)


def zoom(m: np.ndarray, rows: tuple[int, int], cols: tuple[int, int] | None = None) -> tuple[np.ndarray, slice, slice]:
    """The window m[rows, cols] at full resolution (``cols`` default: the same range), clipped to the map;
    returns it with the slices actually used (their starts label the axes)."""
    cols = rows if cols is None else cols
    rs, cs = clip_range(rows, m.shape[0]), clip_range(cols, m.shape[1])
    return m[rs, cs], rs, cs


def clip_range(r: tuple[int, int], n: int) -> slice:
    """Tokens r[0] … r[1] − 1 clipped to 0 … n − 1; ValueError when nothing is left."""
    start, stop = max(0, int(r[0])), min(n, int(r[1]))
    if stop <= start:
        raise ValueError(f"token range {r[0]}…{r[1]} is empty on a map of {n} tokens")
    return slice(start, stop)


__all__ = ["Overview", "clip_range", "edges", "overview", "visible_counts", "zoom"]

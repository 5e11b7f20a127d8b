"""A long map at screen resolution: each overview cell aggregates the block of tokens under it.

    overview(m, cells)  → Overview(max, mean, edges)   m [rows, cols] → at most cells × cells blocks
    zoom(m, rows, cols) → the map's full-resolution window (token ranges, clipped to the map)

Block b covers tokens edges[b] … edges[b + 1] − 1 (blocks differ by at most one token). ``max`` shows where
any strong cell is (a single sharp contribution survives), ``mean`` the block's average mass; a figure says
which it shows. For a causal model the blocks above the diagonal average in the zeros of the mask, so their
``mean`` is lower than the cells' — ``max`` is the honest default there.
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


def edges(n: int, cells: int) -> np.ndarray:
    """Block boundaries of n tokens in at most ``cells`` blocks of (nearly) equal size."""
    blocks = max(1, min(int(cells), n))
    return np.linspace(0, n, blocks + 1).round().astype(np.int64)


def overview(m: np.ndarray, cells: int = 512) -> Overview:
    """Block max and block mean of ``m`` (NaN-free [rows, cols]) in at most ``cells`` blocks per axis; a map
    that already fits is returned as is (blocks of one token)."""
    m = np.asarray(m)
    re, ce = edges(m.shape[0], cells), edges(m.shape[1], cells)
    # reduceat: one pass per axis over the blocks' starts
    row_max = np.maximum.reduceat(m, re[:-1], axis=0)
    row_sum = np.add.reduceat(m.astype(np.float64), re[:-1], axis=0)
    mx = np.maximum.reduceat(row_max, ce[:-1], axis=1)
    total = np.add.reduceat(row_sum, ce[:-1], axis=1)
    sizes = np.diff(re)[:, None] * np.diff(ce)[None, :]
    return Overview(max=mx, mean=(total / sizes).astype(m.dtype), row_edges=re, col_edges=ce)


def zoom(m: np.ndarray, rows: tuple[int, int], cols: tuple[int, int] | None = None) -> tuple[np.ndarray, slice, slice]:
    """The window m[rows, cols] at full resolution (``cols`` default: the same range), clipped to the map;
    returns it with the slices actually used (their starts label the axes)."""
    cols = rows if cols is None else cols

    def clip(r, n):
        start, stop = max(0, int(r[0])), min(n, int(r[1]))
        if stop <= start:
            raise ValueError(f"token range {r[0]}…{r[1]} is empty on a map of {n} tokens")
        return slice(start, stop)

    rs, cs = clip(rows, m.shape[0]), clip(cols, m.shape[1])
    return m[rs, cs], rs, cs


__all__ = ["Overview", "edges", "overview", "zoom"]

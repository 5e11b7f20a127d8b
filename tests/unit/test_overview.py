"""normviz.viz.overview: a long map's blocks (max and mean of the tokens under each cell) and the zoom window."""

import numpy as np
import pytest

from normviz.viz.overview import edges, overview, zoom


def test_blocks_are_the_max_and_mean_of_their_tokens():
    rng = np.random.default_rng(0)
    m = rng.random((1000, 1000)).astype(np.float32)
    ov = overview(m, cells=64)
    assert ov.max.shape == ov.mean.shape == (64, 64)
    r, c = ov.row_edges, ov.col_edges
    assert r[0] == 0 and r[-1] == 1000 and np.diff(r).max() - np.diff(r).min() <= 1
    for bi, bj in ((0, 0), (10, 63), (63, 5)):
        block = m[r[bi] : r[bi + 1], c[bj] : c[bj + 1]]
        assert ov.max[bi, bj] == block.max()
        assert abs(ov.mean[bi, bj] - block.mean()) < 1e-6
    assert ov.block_of(999) == 63 and ov.block_of(0) == 0
    spike = np.zeros((1000, 1000))
    spike[500, 17] = 1.0  # a single sharp cell survives in max
    assert overview(spike, 64).max.max() == 1.0 and overview(spike, 64).mean.max() < 1e-2


def test_small_maps_are_unchanged_and_zoom_clips():
    m = np.arange(36.0).reshape(6, 6)
    ov = overview(m, cells=512)
    assert np.array_equal(ov.max, m) and np.array_equal(ov.mean, m) and list(edges(6, 512)) == list(range(7))
    w, rs, cs = zoom(m, (4, 99), (0, 2))
    assert np.array_equal(w, m[4:, :2]) and rs == slice(4, 6) and cs == slice(0, 2)
    with pytest.raises(ValueError, match="empty"):
        zoom(m, (7, 9))


def test_causal_blocks_leave_out_the_masked_cells():
    """A decoder's map: the cells above the diagonal are masked. Each block's max and mean are over its visible
    cells only (a brute-force mask), blocks wholly above the diagonal are NaN; a signed map keeps the sign of
    the largest magnitude."""
    rng = np.random.default_rng(1)
    n = 301
    m = rng.normal(size=(n, n))
    m[np.triu_indices(n, 1)] = 5.0  # anything above the diagonal must not show
    ov = overview(m, cells=37, causal=True)
    r, c = ov.row_edges, ov.col_edges
    vis = np.tri(n, dtype=bool)
    for bi in range(37):
        for bj in range(37):
            block, ok = m[r[bi] : r[bi + 1], c[bj] : c[bj + 1]], vis[r[bi] : r[bi + 1], c[bj] : c[bj + 1]]
            if not ok.any():
                assert np.isnan(ov.max[bi, bj]) and np.isnan(ov.mean[bi, bj])
                continue
            cells = block[ok]
            want = cells.max() if abs(cells.max()) >= abs(cells.min()) else cells.min()
            assert ov.max[bi, bj] == want and abs(ov.mean[bi, bj] - cells.mean()) < 1e-12
    assert np.isnan(ov.max[0, -1]) and not np.isnan(ov.max[-1, 0])


def test_the_overview_figure_draws_consecutive_tokens_on_a_uniform_grid_within_half_a_token():
    """Consecutive shown positions: the heatmap is placed by x0/dx (plotly.js then paints one image, not a
    rectangle per cell), each block's drawn centre within half a token of its real one; a hidden token between
    shown ones: the blocks' real centres as x/y."""
    from normviz.viz.overview_figure import block_centres, overview_heatmap, uniform_grid

    n, cells = 4001, 256
    e = edges(n, cells)
    for keep in (np.arange(n), np.arange(1, n + 1)):  # a hidden first token shifts positions by one
        x0, dx = uniform_grid(e, keep)
        drawn = x0 + dx * np.arange(len(e) - 1)
        assert np.abs(drawn - block_centres(e, keep)).max() <= 0.5
        assert x0 - dx / 2 == keep[0] - 0.5 and abs(drawn[-1] + dx / 2 - (keep[-1] + 0.5)) < 1e-9
        tr = overview_heatmap(np.zeros((cells, cells)), e, e, keep, aggregate="max").data[0]
        assert tr.x is None and (tr.x0, tr.dx, tr.y0, tr.dy) == (x0, dx, x0, dx)
    holed = np.delete(np.arange(n + 1), 2000)  # a hidden token in the middle
    assert uniform_grid(e, holed) is None
    tr = overview_heatmap(np.zeros((cells, cells)), e, e, holed, aggregate="mean").data[0]
    assert np.array_equal(tr.x, block_centres(e, holed)) and np.array_equal(tr.y, block_centres(e, holed))

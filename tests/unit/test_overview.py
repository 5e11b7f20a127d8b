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
        block = m[r[bi]:r[bi + 1], c[bj]:c[bj + 1]]
        assert ov.max[bi, bj] == block.max()
        assert abs(ov.mean[bi, bj] - block.mean()) < 1e-6
    assert ov.block_of(999) == 63 and ov.block_of(0) == 0
    spike = np.zeros((1000, 1000)); spike[500, 17] = 1.0  # a single sharp cell survives in max
    assert overview(spike, 64).max.max() == 1.0 and overview(spike, 64).mean.max() < 1e-2


def test_small_maps_are_unchanged_and_zoom_clips():
    m = np.arange(36.0).reshape(6, 6)
    ov = overview(m, cells=512)
    assert np.array_equal(ov.max, m) and np.array_equal(ov.mean, m) and list(edges(6, 512)) == list(range(7))
    w, rs, cs = zoom(m, (4, 99), (0, 2))
    assert np.array_equal(w, m[4:, :2]) and rs == slice(4, 6) and cs == slice(0, 2)
    with pytest.raises(ValueError, match="empty"):
        zoom(m, (7, 9))

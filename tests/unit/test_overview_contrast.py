"""The long overviews' colour scales (normviz.viz.contrast): a first column that takes most of every row no
longer leaves the rest of the overview one colour, and the title says which scale is drawn."""

from __future__ import annotations

import numpy as np
import pytest

from normviz.viz.contrast import rescale
from normviz.viz.overview_figure import overview_heatmap


def _sink(n: int = 40, seed: int = 0) -> np.ndarray:
    """Row shares of a causal map whose first column takes ~90 % of every row (NaN above the diagonal)."""
    rng = np.random.default_rng(seed)
    m = rng.random((n, n)) ** 3
    m[:, 0] = 20.0 * m[:, 1:].sum(axis=1).max()
    m = np.where(np.triu(np.ones((n, n)), 1) > 0, 0.0, m)
    m = m / m.sum(axis=1, keepdims=True)
    return np.where(np.triu(np.ones((n, n)), 1) > 0, np.nan, m)


def _spread(z, lo, hi) -> float:
    """Share of the finite cells off column 0 drawn above the lowest tenth of the colour scale."""
    cells = z[:, 1:][np.isfinite(z[:, 1:])]
    return float(np.mean((cells - lo) / (hi - lo) > 0.1))


def test_linear_leaves_the_rest_one_colour_and_the_other_scales_spread_it():
    v = _sink()
    z, lo, hi, name, _ = rescale(v, "linear", 0.0, float(np.nanmax(v)))
    assert name == "linear scale" and _spread(z, lo, hi) < 0.05  # the dark triangle
    for scale in ("rest", "log", "quantile"):
        z, lo, hi, name, _ = rescale(v, scale, 0.0, float(np.nanmax(v)))
        assert _spread(z, lo, hi) > 0.3, scale
        assert np.isnan(z[np.isnan(v)]).all(), scale  # masked cells stay masked
    z, *_ = rescale(v, "rest", 0.0, 1.0)
    assert np.isnan(z[:, 0]).all() and np.allclose(np.nansum(z[1:, 1:], axis=1)[1:], 1.0)


def test_quantiles_are_ranks_and_log_keeps_four_decades():
    v = np.array([[0.0, 1e-9, 1e-2], [1.0, np.nan, 0.5]])
    z, lo, hi, _, _ = rescale(v, "quantile", 0, 1)
    assert (lo, hi) == (0.0, 1.0) and np.allclose(z[np.isfinite(z)], [0, 0.25, 0.5, 1.0, 0.75])
    z, lo, hi, _, unit = rescale(v, "log", 0, 1)
    assert (lo, hi) == (-4.0, 0.0) and z[0, 0] == -4.0 and z[0, 2] == pytest.approx(-2.0) and unit == " (log10)"
    signed = np.array([[-1.0, 2.0]])
    assert "signed" in rescale(signed, "log", -2, 2)[3]
    with pytest.raises(ValueError, match="linear, rest, log, quantile"):
        rescale(v, "loud", 0, 1)


def test_the_overview_title_and_colour_bar_say_the_scale():
    v = _sink(12)
    edges = np.arange(13)
    fig = overview_heatmap(
        v,
        edges,
        edges,
        np.arange(12),
        aggregate="max",
        title="Norm",
        zmin=0,
        zmax=1,
        colorbar_title="share",
        scale="rest",
    )
    assert fig.layout.title.text.endswith("overview: max, row share without the first column")
    assert "row's rest" in fig.data[0].colorbar.title.text and fig.layout.meta["scale"] == "rest"
    logged = overview_heatmap(
        v,
        edges,
        edges,
        np.arange(12),
        aggregate="max",
        title="Norm",
        zmin=0,
        zmax=1,
        colorbar_title="share",
        scale="log",
    )
    assert logged.data[0].zmid is None and logged.layout.title.text.endswith("log scale")  # sequential colours
    plain = overview_heatmap(v, edges, edges, np.arange(12), aggregate="max", title="Norm", zmin=0, zmax=1)
    assert plain.layout.title.text.endswith("overview: max, linear scale")

"""Figure builders: data, axes, hover and colour scales (no Streamlit, no model)."""

import numpy as np

from normviz import viz


def test_heatmap_keeps_repeated_tokens_apart_and_hovers_row_from_column():
    labels = ["[CLS]", "the", "cat", "the", "[SEP]"]
    m = np.arange(25, dtype=float).reshape(5, 5) / 25
    fig = viz.heatmap(m, labels, title="t", zmin=0, zmax=2)
    hm = fig.data[0]
    assert np.asarray(hm.z).shape == (5, 5)
    assert list(fig.layout.yaxis.ticktext) == labels and list(fig.layout.xaxis.ticktext) == labels
    assert len(set(hm.y)) == 5  # one category per position: the two "the" rows stay separate
    assert "%{y} ← %{x}" in hm.hovertemplate
    assert hm.y[1] == "the [1]" and hm.x[3] == "the [3]"
    assert (hm.zmin, hm.zmax) == (0, 2)
    assert hm.showscale and fig.layout.yaxis.autorange == "reversed"


def test_heatmap_signed_values_use_a_diverging_scale_centred_on_zero():
    m = np.array([[0.5, -0.2], [-1.0, 0.3]])
    fig = viz.heatmap(m, ["a", "b"], zmin=-1, zmax=1)
    assert fig.data[0].zmid == 0
    seq = viz.heatmap(np.abs(m), ["a", "b"])
    assert seq.data[0].zmid is None and seq.data[0].zmin == 0.2


def test_heatmap_positions_label_hover_with_original_indices():
    fig = viz.heatmap(np.eye(2), ["cat", "sat"], positions=[2, 3])
    assert [fig.data[0].y[0], fig.data[0].x[1]] == ["cat [2]", "sat [3]"]


def test_bars_one_subplot_per_map():
    rows = {"A": np.array([0.1, 0.9]), "B": np.array([2.0, 1.0])}
    fig = viz.bars(rows, ["x", "y"], [[0, 1], [0, 1]], focus_label="x [0]")
    assert len(fig.data) == 2
    assert list(fig.data[1].y) == [2.0, 1.0]
    assert (
        "x [0] ← y [1]" == np.asarray(fig.data[0].customdata)[1, 0] + " ← " + np.asarray(fig.data[0].customdata)[1, 1]
    )


def test_bars_title_names_the_token_without_its_leading_space():
    # smollm2's Learn page titled its chart 'Row of “ sat [2]”' (the BPE token's space inside the quotes)
    fig = viz.bars({"A": np.array([0.1, 0.9])}, [" The", " sat"], focus_label=" sat [1]")
    assert "“sat [1]”" in fig.layout.title.text


def test_grid_tiles_layers_by_heads_with_gaps():
    L, H, n = 3, 4, 5
    s = np.random.default_rng(0).random((L, H, n, n))
    fig = viz.grid(s, list("abcde"))
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (L * (n + 1) - 1, H * (n + 1) - 1)
    assert np.allclose(z[6:11, 12:17], s[1, 2])  # layer 1, head 2
    assert np.isnan(z[5]).all()  # the gap row between layers
    assert list(fig.layout.xaxis.ticktext) == ["H0", "H1", "H2", "H3"]
    assert list(fig.layout.yaxis.ticktext) == ["L0", "L1", "L2"]
    assert np.asarray(fig.data[0].customdata)[6, 13].startswith("L1 H2: a ← b")
    cb = viz.grid(s, list("abcde"), colorbar_title="weight α").data[0].colorbar
    # at least half the grid's height (issue 23: a fixed ≤ 260 px bar was a sliver beside a tall grid)
    assert cb.title.text == "weight α" and cb.lenmode == "fraction" and 0.5 <= cb.len <= 1


def test_special_share_scatter_one_point_per_head():
    a = np.array([[0.9, 0.2], [0.5, 0.1]])
    b = np.array([[0.1, 0.2], [0.4, 0.1]])
    fig = viz.special_share_scatter(a, b, "weight", "norm")
    pts = fig.data[1]
    assert list(pts.text) == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"]
    assert list(pts.x) == [0.9, 0.2, 0.5, 0.1]


def test_bars_colour_each_map_the_same_in_light_and_dark():
    # Learn's row chart took Streamlit's theme colourway: the weight α's bars dark blue in light mode and light
    # blue in dark mode, the norm's the other way round (screenshot pass); each map now has its own fixed colour
    fig = viz.bars({"A": np.array([0.1, 0.9]), "B": np.array([2.0, 1.0])}, ["x", "y"])
    colours = [t.marker.color for t in fig.data]
    assert all(isinstance(c, str) and c.startswith("#") for c in colours), colours
    assert len(set(colours)) == 2

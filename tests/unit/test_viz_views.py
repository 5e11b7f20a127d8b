"""The figure side of issue 13: readable heatmaps (masks, pair divider, sizes), lines, difference, strip,
layer player. Figures are built for tiny inputs and read back (no browser)."""

import numpy as np
import pytest

from normviz import viz
from normviz.viz.heatmap import MASKED_TEXT
from normviz.viz.labels import MIN_FONT, PRESENT_FONT, abbreviate, occurrence_note, unique_labels
from normviz.viz.player import player_rows

LABELS = ["[CLS]", "the", "cat", "the·2", "[SEP]"]


def _rand(n, seed=0, signed=False):
    m = np.random.default_rng(seed).random((n, n))
    return m - 0.5 if signed else m


def test_causal_cells_are_nan_on_grey_and_say_masked_while_zeros_stay_zeros():
    m = np.tril(_rand(5))
    m[3, 1] = 0.0  # a real zero below the diagonal
    fig = viz.heatmap(m, LABELS, causal=True)
    z = np.asarray(fig.data[0].z, dtype=float)
    upper = np.triu(np.ones((5, 5), bool), 1)
    assert np.isnan(z[upper]).all() and not np.isnan(z[~upper]).any()
    assert z[3, 1] == 0.0
    layer = fig.data[1]  # the grey layer that draws (and names) exactly the masked cells
    assert layer.meta["role"] == "masked" and not layer.showscale and MASKED_TEXT in layer.hovertemplate
    assert np.array_equal(np.isfinite(np.asarray(layer.z, dtype=float)), upper)
    assert not fig.data[0].hoverongaps and not layer.hoverongaps  # each cell hovers from one layer only
    plain = viz.heatmap(m, LABELS)
    assert len(plain.data) == 1 and not np.isnan(np.asarray(plain.data[0].z, dtype=float)).any()


def test_causal_mask_follows_original_positions_when_tokens_are_hidden():
    fig = viz.heatmap(np.ones((3, 3)), ["a", "b", "c"], positions=[1, 2, 4], causal=True)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert np.isnan(z[0, 1]) and np.isnan(z[1, 2]) and z[2, 0] == 1.0


def test_pair_divider_sits_before_the_second_segment():
    fig = viz.heatmap(_rand(5), LABELS, boundary=3)
    xs = {s.x0 for s in fig.layout.shapes if s.x0 == s.x1}
    ys = {s.y0 for s in fig.layout.shapes if s.y0 == s.y1}
    assert xs == {2.5} and ys == {2.5}
    hidden = viz.heatmap(_rand(3), ["a", "b", "c"], positions=[1, 4, 5], boundary=3)
    assert {s.x0 for s in hidden.layout.shapes if s.x0 == s.x1} == {0.5}
    assert not viz.heatmap(_rand(5), LABELS).layout.shapes
    assert not viz.heatmap(_rand(5), LABELS, boundary=0).layout.shapes  # nothing before it: no divider


def test_repeated_token_suffix_is_explained_in_the_hover():
    assert unique_labels(["the", "cat", "the"]) == ["the", "cat", "the·2"]
    assert occurrence_note("the·2") == "the 2nd occurrence of 'the'" and occurrence_note("cat") == ""
    hm = viz.heatmap(_rand(5), LABELS).data[0]
    assert hm.y[3] == "the·2 [3] (the 2nd occurrence of 'the')" and hm.y[1] == "the [1]"
    assert hm.x[3] == hm.y[3]


@pytest.mark.parametrize("n", [5, 40, 128])
def test_labels_are_readable_and_the_plot_square_within_its_column_or_grown_without_one(n):
    """In a page column (``width``: Streamlit fits a chart to it) the figure stays that wide and labels every
    step-th token at ≥ 9 px without overlap; with no column (notebooks, HTML) it grows to label them all."""
    labels = unique_labels([f"tok{i % 17}" for i in range(n)])
    fig = viz.heatmap(_rand(n), labels, width=640)
    ax, ay = fig.layout.xaxis, fig.layout.yaxis
    step = fig.layout.meta["label_step"]
    assert fig.layout.width == 640 and ay.scaleanchor == "x" and ax.tickfont.size >= MIN_FONT
    side = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert side <= 640 - fig.layout.margin.l - fig.layout.margin.r + 1  # square plot inside the width
    assert (
        len(ax.ticktext) == len(ax.tickvals) == -(-n // step)
        and list(ax.ticktext) == [abbreviate(x, 14 if n <= 20 else 10 if n <= 60 else 8) for x in labels][::step]
    )
    assert side / n * step >= ax.tickfont.size  # labels spaced at least a font size apart
    assert (step == 1) == (n == 5)
    grown = viz.heatmap(_rand(n), labels)
    assert len(grown.layout.xaxis.ticktext) == n and grown.layout.meta["label_step"] == 1
    if n == 128:  # 128 labels of ≥ 9 px do not fit the default 560 px: the figure grows instead of overlapping
        assert grown.layout.width > 640 and grown.layout.height >= n * MIN_FONT
    present = viz.heatmap(_rand(n), labels, present=True)
    assert present.layout.xaxis.tickfont.size >= PRESENT_FONT and present.layout.font.size >= PRESENT_FONT


def test_long_tokens_are_abbreviated_on_the_axis_and_whole_in_the_hover():
    labels = ["internationalisation", "organisation·2", "a"]
    fig = viz.heatmap(_rand(3), labels)
    assert fig.layout.xaxis.ticktext[0] != "internationalisation" and fig.layout.xaxis.ticktext[0].endswith("…")
    assert fig.data[0].y[0] == "internationalisation [0]"


def test_colour_bar_has_a_fixed_modest_height_and_its_units():
    for n in (4, 100):
        cb = viz.heatmap(_rand(n), [str(i) for i in range(n)], colorbar_title="weight α").data[0].colorbar
        assert cb.lenmode == "pixels" and cb.len <= 260 and cb.title.text == "weight α"


def test_lines_threshold_hides_small_links_and_widths_grow_with_value():
    m = _rand(6, seed=3)
    for t in (0.0, 0.5, 0.9):
        fig = viz.lines(m, [str(i) for i in range(6)], threshold=t)
        shown = sum(int(np.isnan(np.asarray(tr.x, dtype=float)).sum()) for tr in fig.data if tr.meta["role"] == "links")
        assert shown == int((m / m.max() >= t).sum()) == len(fig.layout.meta["links"])
    links = [tr for tr in fig.data if tr.meta["role"] == "links" and tr.meta["sign"] == 1]
    widths = [tr.line.width for tr in links]
    opac = [tr.opacity for tr in links]
    assert widths == sorted(widths) and opac == sorted(opac) and widths[0] < widths[-1]
    assert np.allclose(fig.layout.meta["matrix"], m)


def test_lines_focus_draws_only_that_tokens_links():
    m = _rand(5, seed=4)
    fig = viz.lines(m, LABELS, positions=[0, 1, 2, 3, 4], focus=2)
    links = np.asarray(fig.layout.meta["links"])
    assert ((links[:, 0] == 2) | (links[:, 1] == 2)).all() and len(links) == 9  # its row and column
    drawn = [tr for tr in fig.data if tr.meta["role"] == "links" and len(tr.x)]
    assert drawn and {tr.line.color for tr in drawn} == {viz.lines.__globals__["FOCUS"]}


def test_lines_signed_values_use_two_colours_and_the_pair_divider():
    m = _rand(5, signed=True)
    fig = viz.lines(m, LABELS, boundary=3)
    signs = {tr.meta["sign"] for tr in fig.data if tr.meta["role"] == "links" and len(tr.x)}
    assert signs == {1, -1}
    assert {s.y0 for s in fig.layout.shapes} == {2.5}


def test_difference_is_row_normalised_or_raw_on_a_centred_scale():
    a, b = _rand(4, 1), _rand(4, 2) * 10
    fig = viz.difference(a, b, ["w", "x", "y", "z"], name_a="weight", name_b="norm")
    z = np.asarray(fig.data[0].z, dtype=float)
    assert np.allclose(z, a / a.sum(1, keepdims=True) - b / b.sum(1, keepdims=True))
    hm = fig.data[0]
    assert hm.zmid == 0 and hm.zmin == -hm.zmax == -np.abs(z).max()
    assert "rows normalised" in fig.layout.title.text and "weight − norm" in fig.layout.title.text
    raw = viz.difference(a, b, ["w", "x", "y", "z"], normalise="raw")
    assert np.allclose(np.asarray(raw.data[0].z, dtype=float), a - b) and "raw" in raw.layout.title.text
    with pytest.raises(ValueError):
        viz.difference(a, b[:3, :3], ["w", "x", "y", "z"])


def test_fx_strip_one_bar_per_token():
    v = np.array([0.5, 2.0, 1.25])
    fig = viz.fx_strip(v, ["a", "b", "a·2"])
    assert list(fig.data[0].y) == list(v) and list(fig.layout.xaxis.ticktext) == ["a", "b", "a·2"]
    assert "2nd occurrence" in np.asarray(fig.data[0].customdata)[2, 1]


def test_layer_player_has_one_frame_per_layer_on_one_scale():
    s = np.stack([np.tril(_rand(4, k)) for k in range(3)])
    fig = viz.layer_player(s, ["a", "b", "c", "d"], causal=True, start=1)
    assert len(fig.frames) == 3 and len(fig.layout.sliders[0].steps) == 3
    assert fig.layout.sliders[0].active == 1
    for li, fr in enumerate(fig.frames):
        z = np.asarray(fr.data[0].z, dtype=float)
        assert np.allclose(np.nan_to_num(z), np.tril(s[li])) and np.isnan(z[0, 1])
    assert fig.data[0].zmin == s.min() and fig.data[0].zmax == s.max()
    assert np.allclose(np.nan_to_num(np.asarray(fig.data[0].z, dtype=float)), s[1])


@pytest.mark.parametrize("present", [False, True])
def test_layer_player_buttons_sit_under_the_slider_and_the_slider_under_the_labels(present):
    """Issue 23: the ▶/❚❚ buttons never cover the slider (their own row below it, at any width) and the slider
    starts below the x labels; the figure grows by both rows."""
    labels = [f"token{i}" for i in range(30)]
    plain = viz.heatmap(_rand(30), labels, present=present, width=600)
    fig = viz.layer_player(np.stack([_rand(30), _rand(30, 1)]), labels, present=present, width=600)
    slider, menu = fig.layout.sliders[0], fig.layout.updatemenus[0]
    slider_px, buttons_px = player_rows(int(fig.layout.font.size))
    assert slider.y == menu.y == 0 and slider.yanchor == menu.yanchor == "top"
    assert slider.pad.t >= plain.layout.margin.b  # below the x tick labels and axis title
    assert menu.pad.t >= slider.pad.t + slider_px  # the buttons' row starts where the slider ends
    assert fig.layout.margin.b >= menu.pad.t + buttons_px  # and both fit inside the figure
    assert fig.layout.height - plain.layout.height >= slider_px + buttons_px
    assert slider.x == 0 and slider.len == 1  # the slider is not shortened or shifted by the buttons


def test_heatmap_threshold_draws_small_cells_as_zero_and_keeps_their_value_in_the_hover():
    m = np.array([[1.0, 0.05], [0.2, 0.5]])
    fig = viz.heatmap(m, ["a", "b"], threshold=0.1)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z[0, 1] == 0 and z[1, 0] == 0.2 and z[0, 0] == 1.0
    assert np.asarray(fig.data[0].customdata, dtype=float)[0, 1] == 0.05  # the hover keeps the value
    assert "customdata" in fig.data[0].hovertemplate and "drawn as 0" in fig.data[0].hovertemplate


def test_focus_token_is_outlined_in_the_heatmap_and_coloured_in_the_strip():
    fig = viz.heatmap(_rand(4), ["a", "b", "c", "d"], positions=[0, 2, 3, 5], focus=3)
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert {(s.y0, s.y1) for s in rects} >= {(1.5, 2.5)} and {(s.x0, s.x1) for s in rects} >= {(1.5, 2.5)}
    assert not [s for s in viz.heatmap(_rand(4), list("abcd"), focus=9).layout.shapes]
    strip = viz.fx_strip(np.ones(3), ["a", "b", "c"], focus=1)
    colours = list(strip.data[0].marker.color)
    assert colours[1] != colours[0] == colours[2]


@pytest.mark.slow
def test_png_and_svg_files_through_kaleido():
    pytest.importorskip("kaleido")
    from tests.helpers.browser import find_browser

    if find_browser() is None:
        pytest.skip("no Chromium for kaleido")
    fig = viz.heatmap(np.tril(_rand(4)), list("abcd"), causal=True, title="t")
    svg = viz.to_svg(fig)
    assert svg.lstrip().startswith(b"<svg") and b"contributing token" in svg
    assert viz.to_png(fig).startswith(b"\x89PNG")


def test_image_export_without_kaleido_says_what_to_install(monkeypatch):
    import sys

    from normviz.core.errors import MissingPackageError

    monkeypatch.setitem(sys.modules, "kaleido", None)
    with pytest.raises(MissingPackageError, match="pip install kaleido"):
        viz.to_svg(viz.heatmap(np.eye(2), ["a", "b"]))


def test_a_clicked_cell_names_its_token_positions():
    from normviz.viz.labels import position_of

    hm = viz.heatmap(_rand(5), LABELS, positions=[0, 1, 2, 7, 9]).data[0]
    assert [position_of(y) for y in hm.y] == [0, 1, 2, 7, 9]
    assert position_of("[CLS]") is None and position_of(None) is None and position_of("a [x]") is None


def test_corpus_reference_labels_sit_beside_the_plot_apart_from_each_other():
    """Issue 23: the BERT-base reference labels were drawn inside the plot, where the curves overprinted them;
    now each sits in the right margin (no curve is drawn there) at its line's height, a font size from the next."""
    import pandas as pd

    from normviz.viz import corpus as plots

    cols = ["mixing_attention", "mixing_norm_layer", "mixing_attn_res", "mixing_attn_res_ln"]
    stats = pd.DataFrame({"layer": range(4), **{c: [0.19, 0.5, 0.9, 0.2] for c in cols}})  # curves cross the refs
    fig = plots.layer_lines(stats, cols)
    refs = [a for a in fig.layout.annotations if a.name == "reference"]
    assert len(refs) == len(fig.layout.shapes) == 4
    lo, hi = fig.layout.yaxis.range
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b - 60
    placed = sorted((a.y - lo) / (hi - lo) * plot_px + a.yshift for a in refs)
    for a in refs:
        assert a.xref == "paper" and a.x >= 1 and a.xanchor == "left"  # right of the plot area
        assert fig.layout.margin.r >= 0.62 * a.font.size * len(a.text)  # and the margin holds it
    assert min(b - a for a, b in zip(placed, placed[1:])) >= refs[0].font.size  # 0.223 and 0.188 pushed apart
    assert plots.label_shifts([0.0, 0.5], 0.0, 1.0, 100, 10) == [0.0, 0.0]
    assert plots.label_shifts([0.0, 0.01], 0.0, 1.0, 100, 10) == [0.0, 9.0]

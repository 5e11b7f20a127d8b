"""normviz.ui.views.long_maps: the long view's numbers and controls without Streamlit (the panels equal the short
view's shown matrices; typed ranges, token search, the window's bounds; a box on the overview as tokens)."""

import numpy as np
import pytest

from normviz.core.errors import InputError
from normviz.ui.kit import data
from normviz.ui.views import long_maps
from normviz.viz.overview_figure import block_centres, positions_to_shown


@pytest.mark.parametrize("hide", [False, True])
@pytest.mark.parametrize("values", ["share", "raw"])
def test_rows_times_factors_are_the_short_views_shown_matrix(hide, values):
    rng = np.random.default_rng(0)
    m = rng.random((30, 30))
    special = np.zeros(30, bool)
    special[[0, 29]] = True
    want, keep = data.shown_matrix(m, special, hide, values)
    k = long_maps.kept_positions(special, hide)
    assert list(k) == keep
    got = m[np.ix_(k, k)] * long_maps.row_factors(m, k, values)[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_typed_ranges():
    assert long_maps.parse_range("100-163", 4000) == ((100, 164), (100, 164))
    assert long_maps.parse_range(" 1200 – 1264 / 0..63 ", 4000) == ((1200, 1265), (0, 64))
    assert long_maps.parse_range("3990-4100", 4000) == ((3990, 4000), (3990, 4000))
    for bad, says in (
        ("abc", "not a token range"),
        ("5000-5010", "past the end"),
        ("0-999", "at most 256"),
        ("1-2/3-4/5-6", "not a token range"),
    ):
        with pytest.raises(InputError, match=says):
            long_maps.parse_range(bad, 4000)


def test_token_search_and_the_window():
    labels = ["<s>", "ĠThe", "Ġriver", "Ġrose", "Ġriverbank", "ĠRiver", "##s", "the·2"]
    assert long_maps.find_tokens(labels, "river") == [2, 5, 4]  # whole-token matches first
    assert long_maps.find_tokens(labels, "the") == [1, 7] and long_maps.find_tokens(labels, "s") == [6, 0, 3]
    assert long_maps.find_tokens(labels, "3") == [3] and long_maps.find_tokens(labels, "  ") == []
    assert long_maps.centred(2, 4000) == (0, 64) and long_maps.centred(3999, 4000) == (3936, 4000)
    assert long_maps.centred(1000, 4000) == (968, 1032) and long_maps.centred(5, 10) == (0, 10)
    assert long_maps.clamp_window((10, 5000), 4000) == (10, 10 + long_maps.MAX_WINDOW)
    assert long_maps.clamp_window((-3, -1), 4000) == (0, 1)
    assert long_maps.shown_index(np.array([1, 2, 3, 5]), 4) == 3  # a hidden position: the next shown one
    assert not long_maps.is_long(long_maps.LONG_TOKENS) and long_maps.is_long(long_maps.LONG_TOKENS + 1)


def test_a_box_on_the_overview_is_a_token_range():
    keep = np.arange(1, 4000)  # position 0 hidden
    e = np.linspace(0, len(keep), 101).round().astype(int)
    centres = block_centres(e, keep)
    assert centres[0] == pytest.approx((1 + keep[e[1] - 1]) / 2)
    a, b = positions_to_shown(keep, 99.6, 160.2)
    assert keep[a] == 100 and keep[b - 1] == 160
    assert positions_to_shown(keep, -50, 3) == (0, 3)

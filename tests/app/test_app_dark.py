"""Issue 29: a dark-theme link (``theme=dark``) draws every chart in dark colours — the head grid's, the depth
map's and the score split's centre (a value 0) near the page, not white; masked cells and frames dark grey; the
routes graph's head edges a blue that stands out from the page. The figures the app sends are read back (AppTest:
the browser does not say its theme there, so the link's is the figures')."""

from __future__ import annotations

import pytest

from normviz.viz import why as vw
from normviz.viz.heatmap import MASKED_BG

from ..helpers.app import app, figures, no_exception
from ..helpers.colours import DARK, colour_at, contrast, luminance, rgb

TEXT = "The capital of France is"


def by_kind(at) -> dict:
    return {f["layout"].get("meta", {}).get("normviz"): f for f in figures(at)}


@pytest.fixture(scope="module")
def why_dark():
    at = app("app_pages/0_Why.py", {"model": "smollm2", "text": TEXT, "theme": "dark"})
    at.run()
    return at


@pytest.mark.parametrize("kind", ["head_grid", "depth_heatmap", "score_split"])
def test_why_page_signed_maps_are_centred_on_the_dark_page(why_dark, kind):
    no_exception(why_dark)
    fig = by_kind(why_dark)[kind]
    scale = fig["data"][0]["colorscale"]
    assert contrast(colour_at(scale, 0.5), DARK) < 1.6, scale  # was white (contrast ~19 on the dark page)
    assert min(contrast(colour_at(scale, t), DARK) for t in (0.0, 1.0)) > 7


def test_why_page_routes_and_bars_lift_their_blue_on_the_dark_page(why_dark):
    figs = by_kind(why_dark)
    heads = [d for d in figs["routes"]["data"] if d.get("name") == "attention head" and d.get("mode") == "lines"]
    assert heads and all(contrast(d["line"]["color"], DARK) >= 4.5 for d in heads), [d["line"] for d in heads]
    assert vw.POS not in figs["candidates"]["data"][0]["marker"]["color"]


def test_explore_masked_cells_are_dark_grey_and_a_light_link_stays_light():
    dark = app(query={"model": "smollm2", "text": TEXT, "theme": "dark"})
    dark.run()
    no_exception(dark)
    panels = [f for f in figures(dark) if f["layout"].get("meta", {}).get("normviz") == "heatmap"]
    assert panels
    for f in panels:
        masked = [d for d in f["data"] if (d.get("meta") or {}).get("role") == "masked"]
        assert masked
        for colour in (masked[0]["colorscale"][0][1], f["layout"]["plot_bgcolor"]):
            r, g, b, a = rgb(colour)  # was translucent grey over translucent grey: a light grey on the page
            assert a == 1.0 and luminance((r, g, b)) < 0.06 and contrast(colour, DARK) < 3, colour
    light = app(query={"model": "smollm2", "text": TEXT, "theme": "light"})
    light.run()
    no_exception(light)
    f = [f for f in figures(light) if f["layout"].get("meta", {}).get("normviz") == "heatmap"][0]
    assert f["layout"]["plot_bgcolor"] == MASKED_BG  # the light page keeps the figures as built

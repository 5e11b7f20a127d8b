"""Issue 30 on the Why page: ``sources_by_layer`` as a layers × tokens heatmap, its numbers normviz's own; a new
candidate redraws it (one backward pass on the page's session)."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.viz.depth import depth_heatmap

from ..helpers.app import arr, figures, no_exception
from ..helpers.why import TEXT, smollm2


def depth_figure(at) -> dict:
    got = [f for f in figures(at) if f["layout"].get("meta", {}).get("normviz") == "depth_heatmap"]
    assert len(got) == 1
    return got[0]


def test_the_depth_heatmap_shows_sources_by_layer(why_page):
    no_exception(why_page)
    fig = depth_figure(why_page)
    lm = smollm2()
    s = normviz.Session(lm, TEXT)
    e = s.explain()
    z = arr(fig["data"][0]["z"])
    assert z.shape == (31, len(s.tokens))
    np.testing.assert_allclose(z, e.sources_by_layer, rtol=1e-4, atol=1e-6 * np.abs(z).max())
    assert "information sits at each depth" in fig["layout"]["title"]["text"]
    # a foil: the figure follows the explanation of the new pair
    cands = s.predict(top=3)
    why_page.selectbox(key="w_why_foil").set_value(cands[1].id).run()
    no_exception(why_page)
    e2 = s.explain(foil=cands[1].id)
    np.testing.assert_allclose(
        arr(depth_figure(why_page)["data"][0]["z"]),
        e2.sources_by_layer,
        rtol=1e-4,
        atol=1e-6 * np.abs(e2.sources_by_layer).max(),
    )


def test_depth_heatmap_escapes_tokens_and_checks_shapes():
    by = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0], [0.0, 0.0, 2.0]])
    fig = depth_heatmap(by, ["<b>x</b>", " a", "b"], what="logit")
    assert fig.data[0].zmin == -3.0 and fig.data[0].zmax == 3.0 and fig.data[0].zmid == 0
    assert "<b>" not in fig.data[0].customdata[0][0]
    assert list(fig.layout.yaxis.ticktext)[0] == "in" and list(fig.layout.yaxis.ticktext)[-1] == "out"
    with pytest.raises(ValueError, match="2 token labels for 3 columns"):
        depth_heatmap(by, ["a", "b"])

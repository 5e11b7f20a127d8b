"""The standalone page in a real headless Chromium (file://, no server, no network): every panel draws,
and hovering a token of the lines view isolates its links."""

import numpy as np
import pytest

from normviz import viz

from ..helpers.browser import chromium, find_browser, wait_until

# polled (helpers.browser.wait_until), not a fixed sleep: a loaded machine once took longer than the sleep
DRAWN = "return document.querySelectorAll('.plotly-graph-div .main-svg').length >= {};"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


@pytest.mark.skipif(find_browser() is None, reason="no chromium/chromedriver")
def test_offline_page_draws_every_panel_and_hover_isolates_a_tokens_links(tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    m = np.random.default_rng(0).random((6, 6))
    labels = ["a", "the", "cat", "the·2", "x", "y"]
    figs = [
        viz.heatmap(np.tril(m), labels, causal=True),
        viz.lines(m, labels, threshold=0.2),
        viz.layer_player(np.stack([m, 2 * m]), labels),
    ]
    page = tmp_path / "p.html"
    page.write_text(viz.standalone_html(figs), encoding="utf-8")
    with chromium(1300, 900) as d:
        d.get(page.as_uri())
        wait_until(d, DRAWN.format(3), timeout=60, idle=False)
        assert d.execute_script("return document.getElementById('nv-panel-2').layout.sliders[0].active") == 0
        d.execute_script("document.getElementById('nv-panel-1').scrollIntoView();")
        t = 3  # hover the receiving token "the·2"
        xy = d.execute_script(
            """var gd = document.getElementById('nv-panel-1'), fl = gd._fullLayout,
            r = gd.getBoundingClientRect();
            return [fl.xaxis.l2p(1) + fl._size.l, fl.yaxis.l2p(arguments[0]) + fl._size.t, r.width, r.height];""",
            t,
        )
        el = d.find_element(By.ID, "nv-panel-1")
        ActionChains(d).move_to_element_with_offset(el, int(xy[0] - xy[2] / 2), int(xy[1] - xy[3] / 2)).perform()
        wait_until(
            d,
            """return document.getElementById('nv-panel-1').data.some(
            t => t.meta && t.meta.role === 'highlight' && t.y && t.y.length > 0);""",
            timeout=30,
            idle=False,
        )
        lit, faded = d.execute_script("""var gd = document.getElementById('nv-panel-1');
            var hl = gd.data.filter(t => t.meta && t.meta.role === 'highlight');
            var ys = [].concat.apply([], hl.map(t => Array.from(t.y || [])));
            return [ys, gd.data.filter(t => t.meta && t.meta.role === 'links').map(t => t.opacity)];""")
    ends = [y for k, y in enumerate(lit) if k % 3 == 1]  # segments: [j, i, null]: the receiving ends
    starts = sorted(y for k, y in enumerate(lit) if k % 3 == 0)
    want = sorted(j for j in range(6) if m[t, j] >= 0.2 * m.max())
    assert ends and set(ends) == {t} and starts == want
    assert max(faded) <= 0.05


@pytest.mark.skipif(find_browser() is None, reason="no chromium/chromedriver")
def test_hostile_title_and_labels_leave_the_page_whole_and_show_as_typed(tmp_path):
    """A title ``<!--<script>`` once put the parser in its double-escaped state: the data block swallowed the
    rest of the page (no numbers, no lines hover); a token ``<b>x</b>`` rendered bold."""
    m = np.random.default_rng(0).random((4, 4))
    labels = ["<b>x</b>", "<!--<script>", "a&b", "y"]
    title = "<!--<script> & </script>"
    figs = [viz.heatmap(m, labels, title=title), viz.lines(m, labels, threshold=0.2)]
    page = tmp_path / "hostile.html"
    page.write_text(viz.standalone_html(figs, title=title, description="<b>x</b>"), encoding="utf-8")
    with chromium(1300, 900) as d:
        d.get(page.as_uri())
        wait_until(d, DRAWN.format(2), timeout=60, idle=False)
        got = d.execute_script("""
            var data = JSON.parse(document.getElementById('normviz-data').textContent);
            var ticks = Array.from(document.querySelectorAll('#nv-panel-0 .xtick text')).map(t => t.textContent);
            var bold = document.querySelectorAll('#nv-panel-0 .xtick text [style*="bold"]').length;
            return [data.title, data.panels[0].values[1][2], typeof nvLines, ticks, bold,
                    document.querySelector('#nv-panel-0 .gtitle').textContent, document.title,
                    document.querySelectorAll('.plotly-graph-div .main-svg').length];""")
    data_title, value, lines_js, ticks, bold, fig_title, page_title, svgs = got
    assert data_title == title and abs(value - m[1, 2]) < 1e-12
    assert lines_js == "function"  # the script after the data block still ran
    assert ticks == labels and bold == 0
    assert fig_title == title and page_title == title and svgs >= 2

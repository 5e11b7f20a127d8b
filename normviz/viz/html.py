"""Figures out of the app: the chart toolbar's image download (PNG or SVG) and one standalone HTML page.

The page embeds plotly.js once (no network needed), draws every figure with its hover, runs the lines
view's hover-to-isolate (a few lines of JS reading ``layout.meta.links``), and keeps each panel's numbers
as plain JSON in ``<script type="application/json" id="normviz-data">`` (NaN → null), so a reader can
check them without plotly. That JSON writes ``<``, ``>``, ``&`` as ``\u003c``, ``\u003e``, ``\u0026``
(:func:`script_json`): a title such as ``<!--<script>`` cannot put the HTML parser into a state where the
data block swallows the rest of the page. Labels and titles inside the figures are escaped for plotly by the
builders (:func:`normviz.viz.labels.plotly_text`).
"""

from __future__ import annotations

import html as _html
import json
import math

import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

IMAGE_FORMATS = ("png", "svg", "jpeg", "webp")


def plotly_config(filename: str = "normviz", fmt: str = "png", scale: int = 2) -> dict:
    """The ``config`` for ``st.plotly_chart(fig, config=...)`` and :func:`standalone_html`: the toolbar's camera
    button downloads ``filename.<fmt>`` (``"svg"`` for papers and slides; ``scale`` multiplies PNG pixels)."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"fmt must be one of {IMAGE_FORMATS}, got {fmt!r}")
    return {
        "displaylogo": False,
        "responsive": True,
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
        "toImageButtonOptions": {"format": fmt, "filename": filename, "scale": scale},
    }


def _plain(x):
    """JSON-able copy: arrays → lists, NaN/inf → None."""
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def panel_numbers(fig: go.Figure) -> dict:
    """What a figure shows as numbers: {"kind", "title", "values"} (a heatmap's z, a strip's bars, a lines
    view's matrix, a layer player's z per layer)."""
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    kind = meta.get("normviz", fig.data[0].type if fig.data else "empty")
    if kind == "lines":
        values = meta.get("matrix")
    elif kind == "layer_player":
        values = [np.asarray(fr.data[0].z, dtype=np.float64) for fr in fig.frames]
    elif fig.data and getattr(fig.data[0], "z", None) is not None:
        values = np.asarray(fig.data[0].z, dtype=np.float64)
    elif fig.data and getattr(fig.data[0], "y", None) is not None:
        values = np.asarray(fig.data[0].y, dtype=np.float64)
    else:
        values = None
    return {"kind": kind, "title": _html.unescape(fig.layout.title.text or ""), "values": _plain(values)}


_SCRIPT_SAFE = (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def script_json(obj) -> str:
    """``obj`` as JSON that can sit inside a ``<script>`` element: ``&``, ``<``, ``>`` (and U+2028/9) as
    ``\\u`` escapes, so nothing in it (``</script>``, ``<!--``, ``<script``) changes how the HTML parser
    reads the page, and ``JSON.parse`` gives back the same strings. NaN is refused (write null)."""
    text = json.dumps(obj, allow_nan=False)
    for raw, safe in _SCRIPT_SAFE:
        text = text.replace(raw, safe)
    return text


_LINES_JS = """
function nvLines(gd) {
  var meta = gd.layout && gd.layout.meta;
  if (!meta || meta.normviz !== "lines" || meta.focus !== null) return;
  var links = meta.links, bins = meta.bins, linkIdx = [], hlIdx = [], side = {};
  gd.data.forEach(function (t, k) {
    var role = t.meta && t.meta.role;
    if (role === "links") linkIdx.push(k);
    else if (role === "highlight") hlIdx.push(k);
    else if (role === "tokens") side[k] = t.meta.side;
  });
  var base = linkIdx.map(function (k) { return gd.data[k].opacity; });
  gd.on("plotly_hover", function (ev) {
    var p = ev.points[0], s = side[p.curveNumber];
    if (!s) return;
    var t = p.pointNumber, xs = [], ys = [];
    for (var b = 0; b < bins; b++) { xs.push([]); ys.push([]); }
    links.forEach(function (l) {  // l = [i (receiving), j (contributing), level, sign]
      if ((s === "left" && l[1] === t) || (s === "right" && l[0] === t)) {
        xs[l[2] - 1].push(0, 1, null); ys[l[2] - 1].push(l[1], l[0], null);
      }
    });
    Plotly.restyle(gd, {opacity: 0.05}, linkIdx);
    Plotly.restyle(gd, {x: xs, y: ys}, hlIdx);
  });
  gd.on("plotly_unhover", function () {
    Plotly.restyle(gd, {opacity: base}, linkIdx);
    Plotly.restyle(gd, {x: hlIdx.map(function () { return []; }), y: hlIdx.map(function () { return []; })}, hlIdx);
  });
}
window.addEventListener("load", function () {
  document.querySelectorAll(".plotly-graph-div").forEach(nvLines);
});
"""

_CSS = """
body { font-family: system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 22px; margin: 0 0 4px 0; } p.nv-desc { margin: 0 0 12px 0; color: #555; }
.nv-grid { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.nv-panel { flex: 1 1 520px; max-width: 100%; overflow-x: auto; } .nv-panel.nv-fixed { flex: 0 0 auto;
  } .nv-caption { font-size: 14px; color: #444; margin: 4px 0 0 0; }
"""


def _labels_inside(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` whose axes widen their margins to hold their tick labels and titles (``automargin``):
    in the app Streamlit's chart theme does that; a bare plotly page keeps the figure's margins, which the
    builders size from a label-width estimate, and cut the y-axis labels of long tokens."""
    out = go.Figure(fig)
    out.update_xaxes(automargin=True)
    out.update_yaxes(automargin=True)
    return out


def standalone_html(
    figures: list[go.Figure],
    title: str = "normviz",
    *,
    description: str = "",
    captions: list[str] | None = None,
    config: dict | None = None,
) -> str:
    """One self-contained HTML page of ``figures`` (plotly.js embedded, so it opens offline; every panel keeps
    its hover). ``title``/``description``/``captions`` are written as text (escaped, never as HTML)."""
    config = config or plotly_config()
    captions = list(captions or [])
    panels, numbers = [], []
    for k, fig in enumerate(figures):
        fig = _labels_inside(fig)
        div = fig.to_html(
            full_html=False, include_plotlyjs=False, div_id=f"nv-panel-{k}", config=config, auto_play=False
        )
        cap = f'<p class="nv-caption">{_html.escape(captions[k])}</p>' if k < len(captions) and captions[k] else ""
        fixed = f' nv-fixed" style="width:{int(fig.layout.width)}px' if fig.layout.width else ""  # keeps its width
        panels.append(f'<div class="nv-panel{fixed}">{div}{cap}</div>')
        numbers.append(panel_numbers(fig))
    data = script_json({"title": title, "panels": numbers})
    desc = f'<p class="nv-desc">{_html.escape(description)}</p>' if description else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_html.escape(title)}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>'
        f'<h1>{_html.escape(title)}</h1>{desc}<div class="nv-grid">{"".join(panels)}</div>'
        f'<script type="application/json" id="normviz-data">{data}</script>'
        f'<script type="text/javascript">{_LINES_JS}</script></body></html>\n'
    )

"""Issue 29: on stage every chart's labels are at the figure's stage font. Streamlit's chart theme sizes an axis's
tick labels at 0.75 rem and its title at 0.875 rem wherever the figure names no size (12 / 14 px, 15 / 17.5 px at
the stage root), so the figures' 18-px stage font never reached the depth map's layers, the bars' values or the
lens's axes (seen in the 1280×800 stage screenshots; 98 of the Why page's 220 labels were 15 px). Every axis,
colour bar and legend of every chart the page sends must name a size ≥ 14 px (AppTest: the figures as sent)."""

from __future__ import annotations

import pytest

from ..helpers.app import app, figures, no_exception

STAGE_MIN_PX = 14


def unsized(fig: dict) -> list[str]:
    """The places of a figure (as sent) whose text takes the chart theme's size or is below STAGE_MIN_PX."""
    lay = fig["layout"]
    out = []
    for name, axis in lay.items():
        if not (name.startswith("xaxis") or name.startswith("yaxis")) or not isinstance(axis, dict):
            continue
        if axis.get("visible") is False:
            continue
        if (axis.get("tickfont") or {}).get("size", 0) < STAGE_MIN_PX and axis.get("showticklabels", True):
            out.append(f"{name} ticks {axis.get('tickfont')}")
        title = axis.get("title") or {}
        if title.get("text") and (title.get("font") or {}).get("size", 0) < STAGE_MIN_PX:
            out.append(f"{name} title {title.get('font')}")
    for k, trace in enumerate(fig["data"]):
        for bar in (trace.get("colorbar"), (trace.get("marker") or {}).get("colorbar")):
            small = ((bar or {}).get("tickfont") or {}).get("size", 0) < STAGE_MIN_PX
            if bar and trace.get("showscale", True) is not False and small:
                out.append(f"trace {k} colour bar {bar.get('tickfont')}")
    return out


@pytest.mark.parametrize(
    "page, query",
    [
        ("app_pages/0_Why.py", {"model": "smollm2", "text": "The capital of France is"}),
        ("app.py", {"model": "smollm2", "text": "The capital of France is"}),
        ("app_pages/1_Overview.py", {"model": "minilm", "text": "The cat sat on the mat."}),
    ],
)
def test_every_chart_label_on_stage_is_stage_sized(page, query):
    at = app(page, {**query, "present": "1"})
    at.run()
    no_exception(at)
    figs = figures(at)
    assert figs
    bad = {
        (f["layout"].get("meta") or {}).get("normviz", f["layout"].get("title", {}).get("text", "?")): unsized(f)
        for f in figs
    }
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, bad

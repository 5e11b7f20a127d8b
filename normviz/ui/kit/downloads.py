"""Downloads of a whole view: one offline HTML page of its figures (built only when the button is clicked)."""

from __future__ import annotations

from normviz import viz

from .state import ViewState


def view_html(figures: list, captions: list[str], model: str, view: ViewState):
    """The current view as one offline HTML page (plotly.js embedded): a function that builds its bytes."""
    figs, caps = list(figures), list(captions)
    where = f"layer {view.layer}" + ("" if view.head is None else f", head {view.head}")
    description = f"{model} · {where} · text: {view.text}" + (f" ‖ {view.pair}" if view.pair else "")

    def build() -> bytes:
        return viz.standalone_html(
            figs, title="normviz", description=description, captions=caps, config=viz.plotly_config(filename="normviz")
        ).encode("utf-8")

    return build

"""Issue 29: the Why page's figures readable from a seat — tokens shown as text (never Python reprs), the
routes graph's rows and nodes legible on a light and a dark background, the logit-lens table at the page's
font size with the chosen layer first."""

from __future__ import annotations

import pytest

from normviz.viz import why as vw

LIGHT, DARK = "#ffffff", "#0e1117"  # Streamlit's light and dark backgrounds


def _luminance(hex_colour: str) -> float:
    c = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    c = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]


def _contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


@pytest.mark.parametrize(
    "token, want",
    [
        (" Paris", "␣Paris"),
        ("Paris", "Paris"),
        ("\xa0", "␣"),
        ("\n", "↵"),
        (" ", "␣"),
        ("", "∅"),
        ("a\tb", "a⇥b"),
        ("is ", "is␣"),
        ("\x07x", "·x"),
    ],
)
def test_tokens_are_shown_as_text_not_reprs(token, want):
    assert vw.shown(token) == want
    assert "\\" not in vw.shown(token) and "'" not in vw.shown(token)


def _routes(n: int, L: int = 4) -> dict:
    nodes = [{"id": f"x{L}_{n - 1}", "kind": "x", "layer": L, "token": n - 1}]
    edges = []
    for l in range(L):
        for t in range(n):
            nodes.append({"id": f"x{l}_{t}", "kind": "x", "layer": l, "token": t})
            nodes.append({"id": f"a{l}_{t}", "kind": "a", "layer": l, "token": t})
            edges.append(
                {
                    "source": f"x{l}_{t}",
                    "target": f"a{l}_{t}",
                    "kind": "residual",
                    "layer": l,
                    "head": None,
                    "from_token": t,
                    "to_token": t,
                    "weight": 0.5,
                }
            )
    return {"tokens": [f"w{k}" for k in range(n)], "n_layers": L, "nodes": nodes, "edges": edges}


@pytest.mark.parametrize("font_size", [12, 20])
def test_routes_graph_rows_and_nodes_are_readable(font_size):
    n = 12
    fig = vw.routes_graph(_routes(n), font_size=font_size)
    lay = fig.layout
    plot_h = lay.height - lay.margin.t - lay.margin.b
    assert plot_h / n >= 26, plot_h / n  # was 16 px + the font for everything, title and legend included
    node = fig.data[-1].marker
    assert node.size <= 8  # small: the edges that meet there stay visible (was 9 px of #333)
    for bg in (LIGHT, DARK):  # WCAG's 3:1 for graphics, on either theme
        assert _contrast(node.color, bg) >= 2.0 or _contrast(node.line.color, bg) >= 3.0, (node.color, bg)
    legend = [d.name for d in fig.data if d.showlegend is not False and d.name]
    assert legend == ["residual"]  # one entry per kind present, by its line


def test_lens_table_shows_the_chosen_layer_first_at_the_page_font():
    rows = [{"after layer": l, **{f"#{j + 1}": f"{vw.shown(' t')}{l}{j} 0.1" for j in range(5)}} for l in range(31)]
    fig = vw.lens_table(rows, layer=12, font_size=22)
    t = fig.data[0]
    assert t.cells.font.size == 22 and t.header.font.size == 22
    assert len(t.cells.values) == 4  # stage font: layer + the top 3 (5 wrap onto two lines at 1280 px)
    assert len(vw.lens_table(rows, font_size=12).data[0].cells.values) == 6
    first = [t.cells.values[c][0] for c in range(4)]
    assert first[0] == "12" and str(t.cells.values[0][1]) == "30"  # the chosen layer, then the model's row
    assert sorted(int(v) for v in t.cells.values[0]) == list(range(31))  # every layer once
    assert "'" not in first[1]

"""The Why page's figures (numpy in, plotly out; no model, no torch): candidates, input-token parts, the
layer × head grid of direct parts, the logit lens, the information-flow routes, attention sinks.

Titles and token texts are escaped here (:func:`normviz.viz.labels.plotly_text`; tokens through :func:`txt`):
plotly renders tags such as <b> in titles, ticks and hovers."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .heatmap import DIVERGING, title_dict
from .labels import abbreviate, fit_labels, plotly_text

POS, NEG, FOIL = "#1f63b4", "#c0392b", "#e67e22"
LEGEND = {"head": "attention head", "residual": "residual", "ff": "FF"}


_GLYPHS = {"\n": "↵", "\r": "␍", "\t": "⇥"}


def shown(s) -> str:
    """A token as a visitor reads it (plain text, never a Python repr): a space that begins or ends it is ␣
    (" Paris" and "Paris" differ; a no-break or other odd space always is), a newline ↵, a tab ⇥, another
    control character ·, the empty token ∅."""
    out = []
    for c in str(s):
        if c in _GLYPHS:
            out.append(_GLYPHS[c])
        elif c != " " and c.isspace():
            out.append("␣")  # \xa0, \u2009 …: a space that is not the space bar's
        elif not c.isprintable() and c != " ":
            out.append("·")
        else:
            out.append(c)
    s = "".join(out)
    if not s:
        return "∅"
    if not s.strip():
        return s.replace(" ", "␣")
    if s.startswith(" "):
        s = "␣" + s[1:]
    if s.endswith(" "):
        s = s[:-1] + "␣"
    return s


def txt(s) -> str:
    """:func:`shown` as plotly text (escaped)."""
    return plotly_text(shown(s))


def _layout(fig: go.Figure, title: str, font_size: int, height: int, **kw) -> go.Figure:
    fig.update_layout(
        title=title_dict(title, font_size),
        font=dict(size=font_size),
        height=int(height),  # escaped once there
        margin=dict(l=10, r=10, t=60 + 3 * font_size, b=10),
        **kw,
    )
    # room for the longest tick label on each side: a rotated first label ("<bos> [0]") reaches left of the plot
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


def candidates(
    tokens: list[str],
    probs,
    *,
    chosen: int | None = None,
    foil: int | None = None,
    title: str = "Next-token candidates",
    font_size: int = 12,
) -> go.Figure:
    """Top-k candidates as horizontal bars of probability, best on top; the target (and foil) highlighted."""
    p = np.asarray(probs, dtype=np.float64)
    names = [txt(t) for t in tokens]
    colors = [POS if k == chosen else FOIL if k == foil else "#9aa5b1" for k in range(len(p))]
    fig = go.Figure(
        go.Bar(
            x=p,
            y=list(range(len(p))),
            orientation="h",
            marker_color=colors,
            customdata=names,
            text=[f"{v:.1%}" for v in p],
            textposition="auto",
            insidetextfont=dict(color="white"),  # readable on the grey bars in dark mode too
            hovertemplate="%{customdata}: p = %{x:.4f}<extra></extra>",
        )
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(p))),
        ticktext=[abbreviate(n, 16) for n in names],
        autorange="reversed",
        tickfont=dict(size=font_size),
    )
    fig.update_xaxes(title=dict(text="probability"), rangemode="tozero")
    return _layout(fig, title, font_size, 110 + (14 + 1.6 * font_size) * len(p), meta=dict(normviz="candidates"))


def signed_bars(
    values,
    labels: list[str],
    *,
    extra: dict | None = None,
    title: str = "",
    font_size: int = 12,
    width: int | None = None,
    what: str = "part of the logit",
) -> go.Figure:
    """One signed bar per token (+ ``extra`` named bars after them, e.g. the bias part); hover names the token
    and its position."""
    v = list(np.asarray(values, dtype=np.float64))
    names = [f"{txt(t)} [{k}]" for k, t in enumerate(labels)]
    for name, x in (extra or {}).items():
        v.append(float(x))
        names.append(txt(name))
    v = np.asarray(v)
    fig = go.Figure(
        go.Bar(
            x=list(range(len(v))),
            y=v,
            marker_color=[POS if x >= 0 else NEG for x in v],
            customdata=names,
            hovertemplate="%{customdata}: %{y:.4g}<extra></extra>",
            name=what,
        )
    )
    fit = fit_labels(len(v), max(160, int(width or 640) - 80), font_size=font_size)
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(len(v)))[:: fit.step],
        ticktext=[abbreviate(n, fit.max_chars) for n in names][:: fit.step],
        tickangle=-60 if len(v) <= 14 else -90,
        tickfont=dict(size=fit.tick_font),
    )
    fig.update_yaxes(title=dict(text=what), zeroline=True, zerolinecolor="#888")
    return _layout(fig, title, font_size, 320 + 8 * font_size, meta=dict(normviz="signed_bars"))


def head_grid(heads, extra: dict[str, np.ndarray], *, title: str = "", font_size: int = 12) -> go.Figure:
    """The layer × head grid of direct parts [L, H] (x = head, y = layer, numeric so a click reads them), with
    ``extra`` columns [L] after the heads (FF, b^O …; a value None/NaN leaves a cell empty). Diverging colours
    centred on 0, scaled to the heads' largest |value|."""
    h = np.asarray(heads, dtype=np.float64)
    L, H = h.shape
    cols = [np.asarray(c, dtype=np.float64).reshape(L) for c in extra.values()]
    z = np.column_stack([h] + cols) if cols else h
    gap = np.full((L, 1), np.nan)
    z = np.column_stack([z[:, :H], gap, z[:, H:]]) if cols else z
    xs = list(range(H)) + ([H] + [H + 1 + k for k in range(len(cols))] if cols else [])
    names = [f"head {k}" for k in range(H)] + ([""] + list(extra) if cols else [])
    hover = np.array([[f"layer {l}, {names[c]}" for c in range(len(xs))] for l in range(L)], dtype=object)
    # the colour scale fits the heads (FF and the embedding are often far larger: their cells may saturate;
    # hover reads every value)
    top = float(np.abs(h).max()) if h.size and np.abs(h).max() > 0 else 1.0
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=xs,
            y=list(range(L)),
            colorscale=DIVERGING,
            zmid=0,
            zmin=-top,
            zmax=top,
            customdata=hover,
            hovertemplate="%{customdata}: %{z:.4g}<extra></extra>",
            colorbar=dict(title=dict(text="logit"), thickness=14),
            xgap=1,
            ygap=1,
        )
    )
    ticks = [k for k in range(H) if H <= 16 or k % max(1, H // 8) == 0]
    fig.update_xaxes(
        tickmode="array",
        tickvals=ticks + xs[H + 1 :],
        ticktext=[str(k) for k in ticks] + [txt(n) for n in list(extra)],
        title=dict(text="head · other parts"),
        tickangle=-45,
    )
    # no grid or zero lines across the gap and the empty cells
    fig.update_yaxes(title=dict(text="layer"), autorange="reversed", showgrid=False, zeroline=False)
    fig.update_xaxes(showgrid=False, zeroline=False)
    return _layout(fig, title, font_size, max(320, 140 + 16 * L + 4 * font_size), meta=dict(normviz="head_grid"))


def lens_lines(
    probs: dict[str, np.ndarray],
    *,
    model_probs: dict[str, float] | None = None,
    title: str = "",
    font_size: int = 12,
    layer: int | None = None,
) -> go.Figure:
    """Each named token's probability after every layer (x = 0 the embedding … L the model's own output);
    ``layer``: the layer read in the lens table, marked by a vertical line."""
    fig = go.Figure()
    if layer is not None:
        fig.add_vline(x=int(layer), line=dict(color="#9aa5b1", width=2, dash="dash"))
    for k, (name, p) in enumerate(probs.items()):
        p = np.asarray(p, dtype=np.float64)
        fig.add_trace(
            go.Scatter(
                x=list(range(len(p))),
                y=p,
                mode="lines+markers",
                name=txt(name),
                line=dict(color=POS if k == 0 else FOIL, width=3),
                hovertemplate=txt(name) + " after layer %{x}: %{y:.4f}<extra></extra>",
            )
        )
    for k, (name, p) in enumerate((model_probs or {}).items()):
        L = len(next(iter(probs.values()))) - 1
        fig.add_trace(
            go.Scatter(
                x=[L],
                y=[p],
                mode="markers",
                marker=dict(symbol="star", size=16, color=POS if k == 0 else FOIL),
                name=f"model: {txt(name)}",
                hovertemplate="the model's probability: %{y:.4f}<extra></extra>",
            )
        )
    fig.update_xaxes(title=dict(text="after layer (0 = embedding)"), automargin=True)
    fig.update_yaxes(title=dict(text="probability"), rangemode="tozero", automargin=True)
    fig = _layout(
        fig,
        title,
        font_size,
        360 + 8 * font_size,
        meta=dict(normviz="lens"),
        legend=dict(orientation="h", y=-0.3, yanchor="top"),
    )
    fig.update_layout(margin=dict(b=40 + 4 * font_size))  # the x-axis title and the legend below it, not clipped
    return fig


def lens_table(rows: list[dict], *, layer: int | None = None, font_size: int = 12, title: str = "") -> go.Figure:
    """The logit lens's top tokens per layer (:func:`normviz.ui.views.why.lens_table`'s rows: "after layer", "#1" …)
    as a table at the page's font size that fits its column (never cut on the right); ``layer``'s row is
    highlighted and listed first, the model's own last row next, then the rest in layer order."""
    cols = [k for k in rows[0]] if rows else []
    cols = cols[:4] if font_size >= 16 else cols  # stage fonts: the top 3, each cell on one line
    order = list(range(len(rows)))
    if layer is not None and 0 <= layer < len(rows):
        order = (
            [layer] + [len(rows) - 1] * (layer != len(rows) - 1) + [k for k in order if k not in (layer, len(rows) - 1)]
        )
    fill = [["rgba(230,126,34,0.35)" if k == layer else "rgba(0,0,0,0)" for k in order]]  # light and dark
    values = [[plotly_text(str(rows[k][c])) for k in order] for c in cols]
    header = ["layer" if c == "after layer" else c for c in cols]
    fig = go.Figure(
        go.Table(
            columnwidth=[0.55] + [1.0] * (len(cols) - 1),
            header=dict(values=header, font=dict(size=font_size), align="left", height=font_size * 2),
            cells=dict(
                values=values,
                font=dict(size=font_size),
                align="left",
                height=int(font_size * 1.9),
                fill=dict(color=fill * len(cols)),
            ),
        )
    )
    out = _layout(fig, title, font_size, 360 + 8 * font_size, meta=dict(normviz="lens_table"))
    out.update_layout(margin=dict(l=4, r=4, b=4))
    return out


def routes_graph(routes: dict, *, title: str = "", font_size: int = 12) -> go.Figure:
    """The routes (``Routes.to_dict()``): layers left to right (x^l at 2l, a^l at 2l + 1), tokens as rows;
    edges drawn as lines whose width grows with importance (head edges blue, residual grey, FF orange);
    hovering an edge's midpoint names its kind, head and tokens."""
    tokens = [txt(t) for t in routes["tokens"]]
    n, L = len(tokens), int(routes["n_layers"])

    def xy(node_id: str) -> tuple[float, float]:
        kind, rest = node_id[0], node_id[1:]
        layer, tok = (int(v) for v in rest.split("_"))
        return (2 * layer + (1 if kind == "a" else 0), tok)

    fig = go.Figure()
    styles = {"head": POS, "residual": "#8a8f98", "ff": FOIL}
    mids: dict[str, list] = {k: [[], [], []] for k in styles}
    named: set[str] = set()
    for kind, color in styles.items():
        for lo, hi, width in ((0.0, 0.2, 1.5), (0.2, 0.5, 3.5), (0.5, 1.01, 6.0)):
            xs, ys = [], []
            for e in routes["edges"]:
                if e["kind"] != kind or not lo <= e["weight"] < hi:
                    continue
                (x0, y0), (x1, y1) = xy(e["source"]), xy(e["target"])
                xs += [x0, x1, None]
                ys += [y0, y1, None]
            if xs:  # the legend names each kind once, by its line (the hover dots are faint)
                first = kind not in named
                named.add(kind)
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=ys,
                        mode="lines",
                        line=dict(color=color, width=width),
                        opacity=0.75,
                        hoverinfo="skip",
                        showlegend=first,
                        legendgroup=kind,
                        name=LEGEND[kind],
                    )
                )
        for e in routes["edges"]:
            if e["kind"] != kind:
                continue
            (x0, y0), (x1, y1) = xy(e["source"]), xy(e["target"])
            who = (
                f"layer {e['layer']} head {e['head']}"
                if e["kind"] == "head" and e["head"] is not None
                else f"layer {e['layer']} attention"
                if e["kind"] == "head"
                else f"layer {e['layer']} {'FF' if kind == 'ff' else 'residual'}"
            )
            mids[kind][0].append((x0 + x1) / 2)
            mids[kind][1].append((y0 + y1) / 2)
            mids[kind][2].append(
                f"{who}: {tokens[e['from_token']]} [{e['from_token']}] → "
                f"{tokens[e['to_token']]} [{e['to_token']}], importance {e['weight']:.3f}"
            )
    for kind, (xs, ys, text) in mids.items():
        if xs:
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="markers",
                    marker=dict(size=max(6, font_size // 2), color=styles[kind], opacity=0.2),
                    text=text,  # hover targets, not ink
                    hovertemplate="%{text}<extra></extra>",
                    legendgroup=kind,
                    showlegend=False,
                    name=LEGEND[kind],
                )
            )
    nx, ny, nt = [], [], []
    for nd in routes["nodes"]:
        x, y = xy(nd["id"])
        nx.append(x)
        ny.append(y)
        where = "after attention of layer" if nd["kind"] == "a" else "entering layer"
        nt.append(
            f"{tokens[nd['token']]} [{nd['token']}], {where} {nd['layer']}"
            if not (nd["kind"] == "x" and nd["layer"] == L)
            else f"{tokens[nd['token']]}: the output"
        )
    # small grey rings: visible on a light and a dark background, never hiding the edges that meet there
    fig.add_trace(
        go.Scatter(
            x=nx,
            y=ny,
            mode="markers",
            text=nt,
            marker=dict(size=max(5, font_size // 3), color="#9aa5b1", line=dict(width=1, color="#5b6472")),
            hovertemplate="%{text}<extra></extra>",
            name="node",
            showlegend=False,
        )
    )
    fit = fit_labels(n, max(200, 28 * n), font_size=font_size)
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(n)),
        ticktext=[abbreviate(t, fit.max_chars) for t in tokens],
        autorange="reversed",
        range=[n - 0.5, -0.5],
        tickfont=dict(size=font_size),
        automargin=True,
        showgrid=True,
        gridcolor="rgba(128,128,128,0.15)",
    )
    step = max(1, L // 12)
    fig.update_xaxes(
        tickmode="array",
        tickvals=[2 * l for l in range(0, L + 1, step)],
        ticktext=[str(l) for l in range(0, L + 1, step)],
        title=dict(text="layer"),
        range=[-0.5, 2 * L + 0.5],
    )
    row = max(30, 2 * font_size)  # a row per token that a seat can read (was 16 px + the font: squashed)
    top, bottom = 60 + 3 * font_size, 40 + 5 * font_size  # bottom: the ticks, the axis title, then the legend
    # the plot area itself holds the rows (the margins grow with the font: on stage they took the rows' room)
    fig = _layout(
        fig,
        title,
        font_size,
        max(360, top + bottom + row * n),
        meta=dict(normviz="routes"),
        legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", font=dict(size=font_size)),
    )
    fig.update_layout(margin=dict(b=bottom))  # the legend sits at the figure's foot, below the axis title
    return fig


def sinks_scatter(alpha_share, norm_share, *, first_token: str, font_size: int = 12) -> go.Figure:
    """Per head: the share of α on the first token against the share of ‖α f(x)‖ on it (one dot per head)."""
    a = np.asarray(alpha_share, dtype=np.float64)
    b = np.asarray(norm_share, dtype=np.float64)
    L, H = a.shape
    names = [f"layer {l} head {h}" for l in range(L) for h in range(H)]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[0, 1], y=[0, 1], mode="lines", line=dict(dash="dot", color="gray"), hoverinfo="skip", showlegend=False
        )
    )
    fig.add_trace(
        go.Scatter(
            x=a.ravel(),
            y=b.ravel(),
            mode="markers",
            text=names,
            showlegend=False,
            marker=dict(
                size=max(7, font_size - 3),
                color=np.repeat(np.arange(L), H),
                colorscale="Plasma",
                colorbar=dict(title=dict(text="layer"), thickness=14),
            ),
            hovertemplate="%{text}<br>α share: %{x:.2f}<br>‖α f(x)‖ share: %{y:.2f}<extra></extra>",
        )
    )
    fig.update_xaxes(range=[-0.02, 1.02], title=dict(text=f"share of attention weight α on {txt(first_token)}"))
    fig.update_yaxes(range=[-0.02, 1.02], title=dict(text=f"share of ‖α f(x)‖ on {txt(first_token)}"))
    return _layout(
        fig, "Attention sinks: weight on the first token vs what it moves", font_size, 440, meta=dict(normviz="sinks")
    )

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


def txt(s) -> str:
    """A visitor's or a tokenizer's text as plotly text: escaped, control characters shown as spaces,
    leading/trailing spaces made visible (␣) so " Paris" and "Paris" differ."""
    s = "".join(c if c.isprintable() else " " for c in str(s))
    if not s.strip():
        s = s.replace(" ", "␣") or "∅"
    elif s.startswith(" "):
        s = "␣" + s[1:]
    return plotly_text(s)


def _layout(fig: go.Figure, title: str, font_size: int, height: int, **kw) -> go.Figure:
    fig.update_layout(title=title_dict(plotly_text(title), font_size), font=dict(size=font_size), height=int(height),
                      margin=dict(l=10, r=10, t=60 + 3 * font_size, b=10), **kw)
    return fig


def candidates(tokens: list[str], probs, *, chosen: int | None = None, foil: int | None = None,
               title: str = "Next-token candidates", font_size: int = 12) -> go.Figure:
    """Top-k candidates as horizontal bars of probability, best on top; the target (and foil) highlighted."""
    p = np.asarray(probs, dtype=np.float64)
    names = [txt(t) for t in tokens]
    colors = [POS if k == chosen else FOIL if k == foil else "#9aa5b1" for k in range(len(p))]
    fig = go.Figure(go.Bar(x=p, y=list(range(len(p))), orientation="h", marker_color=colors,
                           customdata=names, text=[f"{v:.1%}" for v in p], textposition="auto",
                           insidetextfont=dict(color="white"),  # readable on the grey bars in dark mode too
                           hovertemplate="%{customdata}: p = %{x:.4f}<extra></extra>"))
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(p))), ticktext=[abbreviate(n, 16) for n in names],
                     autorange="reversed", tickfont=dict(size=font_size))
    fig.update_xaxes(title=dict(text="probability"), rangemode="tozero")
    return _layout(fig, title, font_size, 110 + (14 + 1.6 * font_size) * len(p), meta=dict(normviz="candidates"))


def signed_bars(values, labels: list[str], *, extra: dict | None = None, title: str = "", font_size: int = 12,
                width: int | None = None, what: str = "part of the logit") -> go.Figure:
    """One signed bar per token (+ ``extra`` named bars after them, e.g. the bias part); hover names the token
    and its position."""
    v = list(np.asarray(values, dtype=np.float64))
    names = [f"{txt(t)} [{k}]" for k, t in enumerate(labels)]
    for name, x in (extra or {}).items():
        v.append(float(x))
        names.append(txt(name))
    v = np.asarray(v)
    fig = go.Figure(go.Bar(x=list(range(len(v))), y=v, marker_color=[POS if x >= 0 else NEG for x in v],
                           customdata=names, hovertemplate="%{customdata}: %{y:.4g}<extra></extra>",
                           name=what))
    fit = fit_labels(len(v), max(160, int(width or 640) - 80), font_size=font_size)
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(v)))[::fit.step],
                     ticktext=[abbreviate(n, fit.max_chars) for n in names][::fit.step],
                     tickangle=-60 if len(v) <= 14 else -90, tickfont=dict(size=fit.tick_font))
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
    fig = go.Figure(go.Heatmap(z=z, x=xs, y=list(range(L)), colorscale=DIVERGING, zmid=0, zmin=-top, zmax=top,
                               customdata=hover, hovertemplate="%{customdata}: %{z:.4g}<extra></extra>",
                               colorbar=dict(title=dict(text="logit"), thickness=14), xgap=1, ygap=1))
    ticks = [k for k in range(H) if H <= 16 or k % max(1, H // 8) == 0]
    fig.update_xaxes(tickmode="array", tickvals=ticks + xs[H + 1:], ticktext=[str(k) for k in ticks] +
                     [txt(n) for n in list(extra)], title=dict(text="head · other parts"), tickangle=-45)
    fig.update_yaxes(title=dict(text="layer"), autorange="reversed")
    return _layout(fig, title, font_size, max(320, 140 + 16 * L + 4 * font_size), meta=dict(normviz="head_grid"))


def lens_lines(probs: dict[str, np.ndarray], *, model_probs: dict[str, float] | None = None, title: str = "",
               font_size: int = 12) -> go.Figure:
    """Each named token's probability after every layer (x = 0 the embedding … L the model's own output)."""
    fig = go.Figure()
    for k, (name, p) in enumerate(probs.items()):
        p = np.asarray(p, dtype=np.float64)
        fig.add_trace(go.Scatter(x=list(range(len(p))), y=p, mode="lines+markers", name=txt(name),
                                 line=dict(color=POS if k == 0 else FOIL, width=3),
                                 hovertemplate=txt(name) + " after layer %{x}: %{y:.4f}<extra></extra>"))
    for k, (name, p) in enumerate((model_probs or {}).items()):
        L = len(next(iter(probs.values()))) - 1
        fig.add_trace(go.Scatter(x=[L], y=[p], mode="markers", marker=dict(symbol="star", size=16,
                                 color=POS if k == 0 else FOIL), name=f"model: {txt(name)}",
                                 hovertemplate="the model's probability: %{y:.4f}<extra></extra>"))
    fig.update_xaxes(title=dict(text="after layer (0 = embedding)"))
    fig.update_yaxes(title=dict(text="probability"), rangemode="tozero")
    return _layout(fig, title, font_size, 340 + 6 * font_size, meta=dict(normviz="lens"),
                   legend=dict(orientation="h", y=-0.25))


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
    for kind, color in styles.items():
        for lo, hi, width in ((0.0, 0.2, 1.5), (0.2, 0.5, 3.5), (0.5, 1.01, 6.0)):
            xs, ys = [], []
            for e in routes["edges"]:
                if e["kind"] != kind or not lo <= e["weight"] < hi:
                    continue
                (x0, y0), (x1, y1) = xy(e["source"]), xy(e["target"])
                xs += [x0, x1, None]
                ys += [y0, y1, None]
            if xs:
                fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=color, width=width),
                                         opacity=0.75, hoverinfo="skip", showlegend=False))
        for e in routes["edges"]:
            if e["kind"] != kind:
                continue
            (x0, y0), (x1, y1) = xy(e["source"]), xy(e["target"])
            who = (f"layer {e['layer']} head {e['head']}" if e["kind"] == "head" and e["head"] is not None
                   else f"layer {e['layer']} attention" if e["kind"] == "head"
                   else f"layer {e['layer']} {'FF' if kind == 'ff' else 'residual'}")
            mids[kind][0].append((x0 + x1) / 2)
            mids[kind][1].append((y0 + y1) / 2)
            mids[kind][2].append(f"{who}: {tokens[e['from_token']]} [{e['from_token']}] → "
                                 f"{tokens[e['to_token']]} [{e['to_token']}], importance {e['weight']:.3f}")
    for kind, (xs, ys, text) in mids.items():
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", marker=dict(size=7, color=styles[kind],
                                     opacity=0.35), text=text, hovertemplate="%{text}<extra></extra>",
                                     name={"head": "attention head", "residual": "residual", "ff": "FF"}[kind]))
    nx, ny, nt = [], [], []
    for nd in routes["nodes"]:
        x, y = xy(nd["id"])
        nx.append(x)
        ny.append(y)
        where = "after attention of layer" if nd["kind"] == "a" else "entering layer"
        nt.append(f"{tokens[nd['token']]} [{nd['token']}], {where} {nd['layer']}"
                  if not (nd["kind"] == "x" and nd["layer"] == L) else f"{tokens[nd['token']]}: the output")
    fig.add_trace(go.Scatter(x=nx, y=ny, mode="markers", marker=dict(size=9, color="#333"), text=nt,
                             hovertemplate="%{text}<extra></extra>", name="node", showlegend=False))
    fit = fit_labels(n, max(200, 28 * n), font_size=font_size)
    fig.update_yaxes(tickmode="array", tickvals=list(range(n)), ticktext=[abbreviate(t, fit.max_chars) for t in tokens],
                     autorange="reversed", range=[n - 0.5, -0.5])
    step = max(1, L // 12)
    fig.update_xaxes(tickmode="array", tickvals=[2 * l for l in range(0, L + 1, step)],
                     ticktext=[str(l) for l in range(0, L + 1, step)], title=dict(text="layer"),
                     range=[-0.5, 2 * L + 0.5])
    return _layout(fig, title, font_size, max(320, 120 + (16 + font_size) * n), meta=dict(normviz="routes"),
                   legend=dict(orientation="h", y=-0.2))


def sinks_scatter(alpha_share, norm_share, *, first_token: str, font_size: int = 12) -> go.Figure:
    """Per head: the share of α on the first token against the share of ‖α f(x)‖ on it (one dot per head)."""
    a = np.asarray(alpha_share, dtype=np.float64)
    b = np.asarray(norm_share, dtype=np.float64)
    L, H = a.shape
    names = [f"layer {l} head {h}" for l in range(L) for h in range(H)]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(dash="dot", color="gray"),
                             hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=a.ravel(), y=b.ravel(), mode="markers", text=names, showlegend=False,
                             marker=dict(size=max(7, font_size - 3), color=np.repeat(np.arange(L), H),
                                         colorscale="Plasma", colorbar=dict(title=dict(text="layer"), thickness=14)),
                             hovertemplate="%{text}<br>α share: %{x:.2f}<br>‖α f(x)‖ share: %{y:.2f}<extra></extra>"))
    fig.update_xaxes(range=[-0.02, 1.02], title=dict(text=f"share of attention weight α on {txt(first_token)}"))
    fig.update_yaxes(range=[-0.02, 1.02], title=dict(text=f"share of ‖α f(x)‖ on {txt(first_token)}"))
    return _layout(fig, "Attention sinks: weight on the first token vs what it moves", font_size, 440,
                   meta=dict(normviz="sinks"))

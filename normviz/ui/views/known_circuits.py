"""The Trust page's "Known circuits" view: pick a benchmark of normviz.circuits, see each method's ROC against the
circuit and the circuit on the head grid with the method's top heads outlined. It draws the shipped scores
(``assets/circuits/scores.json``, :func:`normviz.trust.circuit_scores.shipped`); nothing is computed here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

MEANING = (
    "Each benchmark is a small model trained once, its circuit found from its attention patterns (induction) or "
    "planted by training (planted_induction, ioi: the other heads are trained not to matter for the task), or compiled "
    "from a RASP program by Tracr (tracr_*: the circuit read from the program's graph, beside side programs whose "
    "heads the answer does not use), and verified by intervention (ablating it removes most of the logit "
    "difference, as many other heads little). "
    "A method ranks the heads by the mean |score| over the benchmark's examples; AUROC: the chance "
    "that a circuit head ranks above another head (1: the circuit first; 0.5: chance). Curve area: keep "
    "the method's top k heads, mean-ablate the rest, the share of the logit difference recovered, averaged "
    "over k. Intervals: 95 % bootstrap over examples. Cost: seconds per example beside head ablation's."
)


def roc(grid, truth) -> tuple[np.ndarray, np.ndarray]:
    """(false-positive rate, true-positive rate) of ranking heads by ``grid`` against ``truth``, ties as one step."""
    s, t = np.asarray(grid, dtype=np.float64).ravel(), np.asarray(truth, dtype=bool).ravel()
    fpr, tpr = [0.0], [0.0]
    for v in sorted(set(s.tolist()), reverse=True):
        above = s >= v
        tpr.append(float((above & t).sum() / max(1, t.sum())))
        fpr.append(float((above & ~t).sum() / max(1, (~t).sum())))
    return np.array(fpr), np.array(tpr)


def truth_of(row: dict) -> np.ndarray:
    grid = np.asarray(row["methods"][0]["grid"])
    out = np.zeros(grid.shape, dtype=bool)
    for l, h in row["circuit"]:
        out[l, h] = True
    return out


def roc_figure(row: dict, font_size: int = 14) -> go.Figure:
    truth = truth_of(row)
    fig = go.Figure()
    for m in row["methods"]:
        fpr, tpr = roc(m["grid"], truth)
        fig.add_trace(
            go.Scatter(
                x=fpr, y=tpr, mode="lines+markers", name=f"{m['method']} ({m['auroc']:.2f})", line_shape="linear"
            )
        )
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="chance", line=dict(dash="dot", color="grey")))
    fig.update_layout(
        title=f"{row['benchmark']}: ROC of each method's head ranking (AUROC)",
        xaxis_title="heads outside the circuit ranked above (false-positive rate)",
        yaxis_title="circuit heads found (true-positive rate)",
        font=dict(size=font_size),
        height=480,
    )
    return fig


def grid_figure(row: dict, method: str, font_size: int = 14) -> go.Figure:
    """The method's mean |score| per head; circuit heads marked ●, the method's top heads (as many as the circuit
    has) outlined."""
    m = next(x for x in row["methods"] if x["method"] == method)
    grid = np.asarray(m["grid"])
    truth = truth_of(row)
    L, H = grid.shape
    text = [["●" if truth[l, h] else "" for h in range(H)] for l in range(L)]
    fig = go.Figure(
        go.Heatmap(
            z=grid,
            x=[f"H{h}" for h in range(H)],
            y=[f"L{l}" for l in range(L)],
            text=text,
            texttemplate="%{text}",
            colorscale="Blues",
            colorbar=dict(title="mean |score|"),
            hovertemplate="layer %{y}, head %{x}: %{z:.4g}<extra></extra>",
        )
    )
    for l, h in m["top"][: int(truth.sum())]:
        fig.add_shape(type="rect", x0=h - 0.5, x1=h + 0.5, y0=l - 0.5, y1=l + 0.5, line=dict(color="#d62728", width=3))
    fig.update_layout(
        title=f"{method}: ● the circuit, □ the method's top {int(truth.sum())} heads",
        font=dict(size=font_size),
        height=160 + 60 * L,
        yaxis=dict(autorange="reversed"),
    )
    return fig


def edge_table(row: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "edge method": m["method"],
                "AUROC": m["auroc"],
                "AUROC 95% lo": m["auroc_lo"],
                "AUROC 95% hi": m["auroc_hi"],
                "s / example": m["seconds"],
                "× head ablation": m["cost_vs_ablation"],
                "top edge": "L{}.H{} → L{}.H{}".format(*m["top"][0][0], *m["top"][0][1]) if m["top"] else "",
            }
            for m in row.get("edge_methods", [])
        ]
    )


def table(row: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "method": m["method"],
                "AUROC": m["auroc"],
                "AUROC 95% lo": m["auroc_lo"],
                "AUROC 95% hi": m["auroc_hi"],
                "curve area": m["area"],
                "area 95% lo": m["area_lo"],
                "area 95% hi": m["area_hi"],
                "s / example": m["seconds"],
                "× head ablation": m["cost_vs_ablation"],
            }
            for m in row["methods"]
        ]
    )


def render(ui, st, font_size: int = 14) -> None:
    """The view (Trust page hook): widgets, the two figures and the table."""
    from ...trust.circuit_scores import shipped

    rows = shipped()
    if not rows:
        st.caption("No known-circuit scores are shipped; run `normviz faithfulness --circuits --out DIR`.")
        return
    names = [r["benchmark"] for r in rows]
    name = st.selectbox("Benchmark", names, key="w_circuits_bench")
    row = rows[names.index(name)]
    st.caption(row["description"])
    if row.get("proxy"):
        st.info(
            f"{name} has no known circuit: ● marks the proxy (the heads head ablation ranks first), so the "
            "AUROC here is agreement with ablation; the curve areas need no truth."
        )
    ui.chart(roc_figure(row, font_size), key="circuits_roc", filename="circuits_roc")
    methods = [m["method"] for m in row["methods"]]
    method = st.selectbox("Method on the head grid", methods, key="w_circuits_method")
    ui.chart(grid_figure(row, method, font_size), key="circuits_grid", filename="circuits_grid")
    st.dataframe(table(row), hide_index=True)
    if row.get("edge_methods"):
        st.caption(
            "Edges: each edge method's ranking of the head → later-head edges against the circuit's edges "
            "(AUROC, 95 % bootstrap interval over examples)."
        )
        st.dataframe(edge_table(row), hide_index=True)
    st.caption(MEANING)
    if name == "induction":
        ui.link_to_page(
            "app_pages/2_Learn.py",
            "How the induction circuit works, split exactly: the Learn lesson ↗",
            {"lesson": "induction"},
        )

"""The Overview page's regions: the controls (which map, compared with which), the grids of every layer and head,
the no-op heads (their weight on the special tokens against their norm) and the zoom into one head. The numbers:
:mod:`.overview_maps` (one layer at a time; the whole [L, H, n, n] arrays are never made)."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import numpy as np
import pandas as pd
import streamlit as st

from ... import viz
from ...core.errors import NormvizError
from ..kit import data
from ..kit import st_parts as ui
from ..kit.fetch import admitted
from . import overview_maps, overview_zoom


def draw_controls(view, lm, bar, keys: list[str]) -> None:
    """The map and the map it is compared with (a link's unknown map said, then replaced)."""
    c1, c2 = bar[1:] if bar else st.columns(2)
    with c1:
        if "w_ov_map" not in st.session_state and view.overview_map not in keys:
            ui.say(
                "warning",
                f"The link's overview_map={view.overview_map!r} is not a map of {lm.name}; showing {keys[0]}.",
            )
        ui.seed("w_ov_map", view.overview_map if view.overview_map in keys else keys[0])
        view.overview_map = st.selectbox("Map", keys, key="w_ov_map", format_func=ui.title)
    with c2:
        compare_opts = ["(none)"] + keys
        if "w_ov_compare" not in st.session_state and view.overview_compare not in keys + ["(none)"]:
            ui.say(
                "warning",
                f"The link's overview_compare={view.overview_compare!r} is not a map of {lm.name}; "
                "comparing with none.",
            )
        ui.seed("w_ov_compare", view.overview_compare if view.overview_compare in keys else "(none)")
        view.overview_compare = st.selectbox(
            "Compare with", compare_opts, key="w_ov_compare", format_func=lambda k: k if k == "(none)" else ui.title(k)
        )


def draw_grids(view, lm, session, shown: list[str], stacks: dict, m: int, labels: list[str], fs: int):
    """Each shown map as a grid of every layer and head (a click opens that head on Explore). Gives the columns
    (the zoom goes beside a single grid)."""
    if len(shown) == 1:
        grid_cols = st.columns([3, 2], gap="medium")
        places = [grid_cols[0]]
    else:  # stage mode: the two grids side by side on the first screen; else one per row, each square larger
        grid_cols = st.columns(2, gap="medium") if view.present else [st.container()]
        places = grid_cols if view.present else grid_cols * len(shown)
    heads_shown = {}
    room = viz.grid_bar_room([data.unit(k, "raw") for k in shown], fs)  # one plot area for grids side by side
    for k, place in zip(shown, places):
        with place:
            s = stacks[k][:, :, :m, :m]
            heads = None if s.shape[1] > 1 else ["layer"]
            hint = (1100 if not view.present or len(shown) == 1 else 640) if s.shape[1] > 1 else 300
            tall = None
            if view.present:  # the measured column and the window: both grids whole on the first screen
                w, h = ui.screen()
                if w and s.shape[1] > 1 and len(shown) > 1:  # a column's width (not capped by the height)
                    hint = max(hint, ui.panel_width(2, False))
                tall = max(360, h - 170) if h else None
            fig = viz.grid(
                s,
                labels[:m],
                title=f"{ui.title(k)}\n{ui.context_text(lm.name, view.text, 50, sep=': ')}",
                font_size=fs,
                head_names=heads,
                width_hint=hint,
                colorbar_title=data.unit(k, "raw"),
                max_height=tall,
                bar_room=room,
            )
            ui.chart(fig, key=f"grid_{k}", filename=f"normviz_overview_{k}")
            heads_shown[f"grid_{k}"] = s.shape[1]
    clicked = ui.grid_clicks(heads_shown, m + 1)
    if clicked is not None:  # a square of a grid: that head on Explore
        view = replace(view, layer=clicked["layer"], head=clicked["head"] if clicked["head"] is not None else view.head)
        ui.save_view(view)
        st.switch_page("app_pages/0_Explore.py", query_params=view.to_query())
    return grid_cols


def draw_noop_heads(view, summary: list[str], sink, sink_name: str, shares: dict, fs: int) -> None:
    """Which heads are no-op heads: each head's weight on the special tokens against its norm's share."""
    st.subheader("Which heads are no-op heads?")
    if not summary:
        st.info("The per-head summary needs the attention and norm maps.")
        return
    if not sink.any():
        st.info("This text has no special tokens, so there is no share to compare.")
    elif len(shares) == 2:
        wa, wn = shares["attention"], shares["norm"]
        st.caption(
            f"Share of each head's attention weight that lands on {ui.plain(sink_name)}, against the share "
            "of its norm ‖α f(x)‖. Heads far below the diagonal attend there but move little: their weight "
            "says more than their effect."
        )
        left, right = st.columns([1, 1])
        with left:
            st.plotly_chart(
                ui.themed(viz.special_share_scatter(wa, wn, "attention weight", "norm", font_size=fs)),
                key="noop_scatter",
            )
        with right:
            L, H = wa.shape
            table = pd.DataFrame(
                {
                    "layer": np.repeat(np.arange(L), H),
                    "head": np.tile(np.arange(H), L),
                    "weight → special": wa.ravel().round(3),
                    "norm → special": wn.ravel().round(3),
                }
            )
            table["gap"] = (table["weight → special"] - table["norm → special"]).round(3)
            top = table.sort_values("gap", ascending=False).head(12)
            top["open"] = [explore_url(view, int(r.layer), int(r.head)) for r in top.itertuples()]
            st.dataframe(
                top,
                hide_index=True,
                width="stretch",
                column_config={
                    "layer": st.column_config.NumberColumn("layer", width="small"),
                    "head": st.column_config.NumberColumn("head", width="small"),
                    "open": st.column_config.LinkColumn(
                        "open",
                        display_text="Explore ↗",
                        width="small",
                        help="This head on the Explore page (same text)",
                    ),
                },
            )
            st.download_button(
                "Per-head summary (CSV)",
                table.to_csv(index=False).encode(),
                file_name="normviz_heads_special_share.csv",
                mime="text/csv",
            )
    else:
        st.info("The per-head summary needs the attention and norm maps (refused above).")


def layer_by_layer(session, shown, m, summary, sink):
    """The grids and the per-head shares (``ui.overview_maps.overview``: one layer at a time) with a progress
    bar, within the server's memory budget; a refused key (its cost for one layer, an error) is said."""
    bar = st.empty()
    prog = bar.progress(0.0, text="Computing the maps one layer at a time…")
    try:
        with admitted(
            session, overview_maps.layer_bytes(session, list(dict.fromkeys(shown + summary))), what="this overview"
        ):
            stacks, shares, refused = overview_maps.overview(
                session,
                shown,
                m,
                summary,
                sink,
                lambda f, msg: prog.progress(min(1.0, f), text=f"Computing the maps: {msg}"),
            )
    except NormvizError as exc:  # the server's memory budget
        ui.say("error", ui.shorten_error(exc, 600))
        return {}, {}
    finally:
        bar.empty()
    for k, why in refused.items():
        ui.say("error", f"{ui.title(k)}: {ui.shorten_error(why, 600)}")
    return stacks, shares


def explore_url(view, layer: int, head: int) -> str:
    """A relative link to Explore showing ``layer``/``head`` of this view (every value percent-encoded)."""
    return "./?" + urlencode(replace(view, layer=layer, head=head).to_query())


@st.fragment
def zoom_head(view, lm, session, shown, labels, fs) -> None:
    """One head of the grid, large and with its token labels, and a link that opens it on Explore. A fragment:
    a zoom click reruns (and resends) this panel only, not the grids beside it (18.6 MB a click on smollm2)."""
    st.markdown("**Zoom into a head**")
    L, H = lm.n_layers, lm.n_heads
    ui.seed_index("w_ov_layer", view.layer % L if -L <= view.layer < 0 else view.layer, L, "layer")
    ui.seed("w_ov_head", view.head if view.head is not None and 0 <= view.head < H else 0)
    if st.session_state["w_ov_head"] not in range(H):
        st.session_state["w_ov_head"] = 0
    c1, c2 = st.columns(2)
    with c1:
        view.layer = st.number_input("Layer", 0, L - 1, key="w_ov_layer")
    with c2:
        head = st.number_input("Head", 0, H - 1, key="w_ov_head")
    per_head = [k for k in shown if len(session.array_shape(k)) == 4]
    view.head = int(head) if per_head else view.head
    ui.save_view(view)
    k = shown[0]
    one = int(head) if len(session.array_shape(k)) == 4 else None
    main = ui.main_width()  # the zoom's column: 2/5 of the page beside one grid, else the page
    width = None if main is None else (int(main * 2 / 5) - 16 if len(shown) == 1 else min(main, 760))
    overview_zoom.draw(
        session,
        lm,
        k,
        int(view.layer),
        one,
        labels,
        fs,
        width,
        view.present,  # bounded at any n
        data.pair_boundary(_Axis(session)),
        f"normviz_L{view.layer}_H{head}_{k}",
    )
    ui.link_to_page("app_pages/0_Explore.py", f"Open layer {view.layer}, head {head} in Explore", {})


class _Axis:
    """What ``data.pair_boundary`` reads of a session (its pair and special tokens)."""

    def __init__(self, session):
        self.text_pair, self.special = session.text_pair, np.asarray(session.encoded.special, bool)

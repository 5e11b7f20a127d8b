"""Explore's maps, a function per screen region: the panels (two per row, or A | B when comparing), what goes
under them (the difference, the layer player, the focus token's bars) and the export row. The controls:
:mod:`.explore`."""

from __future__ import annotations

import streamlit as st

from ... import viz
from ..kit import data
from ..kit import st_parts as ui
from ..kit.frames import frame_name
from . import learn


class Panels:
    """Draws panels of one view and keeps what was drawn: the figures and captions (the HTML download), the
    ‖f(x)‖ strips (key → shown positions, for instant switching)."""

    def __init__(self, view, fs: int, width, stem: str):
        self.view, self.fs, self.width, self.stem = view, fs, width, stem
        self.frame = frame_name(view.layer, view.head)
        self.figures: list = []
        self.captions: list[str] = []
        self.strips: dict[str, list[int]] = {}  # fx strips drawn: key → shown positions

    def draw(self, p, rng, sess, model, tag: str, bound, layer: int, head) -> None:
        """One panel (``tag`` "" on the left, "b_" on a comparison's right), its caption and ‖f(x)‖ strip."""
        view, fs, width = self.view, self.fs, self.width
        if view.draw == "lines":
            fig = viz.lines(
                p.matrix,
                p.row_labels,
                positions=p.index,
                threshold=view.threshold,
                focus=view.focus,
                title=p.title,
                font_size=fs,
                present=view.present,
                boundary=bound,
                height=width,
                width=width,
            )
        else:
            fig = viz.heatmap(
                data.thresholded(p.matrix, view.threshold),
                p.row_labels,
                title=p.title,
                zmin=rng[0],
                zmax=rng[1],
                positions=p.index,
                font_size=fs,
                colorbar_title=data.unit(p.key, view.values),
                causal=model.is_causal,
                boundary=bound,
                present=view.present,
                width=width,
            )
            if view.focus is not None and view.focus in p.index:
                ui.outline_token(fig, p.index.index(view.focus), len(p.index))
            if tag == "":
                fig.layout.meta = {**(fig.layout.meta or {}), "frame": self.frame}  # what instant switching reads
        ui.context_line(fig, model.name, sess.text, fs)  # a PNG of the panel names its model and text
        ui.chart(fig, key=f"panel_{tag}{p.key}", filename=f"{self.stem}_{p.key}")
        self.figures.append(fig)
        self.captions.append(learn.caption(p.key))
        st.caption(ui.plain(learn.caption(p.key), None))
        ui.learn_link(p.key, "What is this?")  # on both sides of a comparison: what follows starts level
        norms = ui.fx_norms(sess, layer) if view.fx and p.key in ("norm", "norm_layer") else None
        if norms is not None:
            vals, what = data.fx_strip(norms, head, p.index)
            strip = viz.fx_strip(
                vals, p.row_labels, positions=p.index, title=what, font_size=fs, present=view.present, width=width
            )
            if tag == "":
                strip.layout.meta = {**(strip.layout.meta or {}), "frame": self.frame}
                self.strips[p.key] = list(p.index)
            ui.chart(strip, key=f"fx_{tag}{p.key}", filename=f"{self.stem}_fx")
            self.figures.append(strip)
            self.captions.append("‖f(x_j)‖: the length of each token's transformed vector (vector units).")

    def draw_rows(self, panels, ranges, session, lm, boundary) -> None:
        """Two panels per row; under the row that completes the α / ‖αf‖ pair, where they differ most."""
        view = self.view
        per_row = 2
        pair = data.weights_norm_pair(panels)
        for start in range(0, len(panels), per_row):
            cols = st.columns(per_row, gap="medium")
            row = panels[start : start + per_row]
            for col, p, rng in zip(cols, row, ranges[start : start + per_row]):
                with col:
                    self.draw(p, rng, session, lm, "", boundary, view.layer, view.head)
            drawn = {p.key for p in panels[: start + per_row]}
            if pair and {pair[0].key, pair[1].key} <= drawn:  # under the row that completes the pair
                worst = data.largest_difference(*pair)
                if worst is not None:
                    name_b = "‖Σαf‖" if pair[1].key == "norm_layer" else "‖αf‖"
                    st.caption(ui.plain(data.callout_text(worst, "α", name_b), None), help=data.CALLOUT_HELP)
                pair = None

    def draw_compared(self, panels, second, session, lm, boundary) -> None:
        """Each map beside the same map of the second text or model, one colour scale per map."""
        view = self.view
        name_b, b, panels_b, lm_b, session_b = second
        st.caption(
            ui.plain(
                f"Left: {lm.name} on the text above. Right: {name_b}. Same maps, layer and head; "
                "one colour scale for each map across both sides.",
                None,
            )
        )
        ranges, ranges_b = data.compared_ranges(panels, panels_b, view.shared_scale)  # one colour scale per map
        by_key = {p.key: (p, r) for p, r in zip(panels_b, ranges_b)}
        for p, rng in zip(panels, ranges):
            left, right = st.columns(2, gap="medium")
            with left:
                self.draw(p, rng, session, lm, "", boundary, view.layer, view.head)
            with right:
                if p.key in by_key:
                    self.draw(
                        by_key[p.key][0],
                        by_key[p.key][1],
                        session_b,
                        lm_b,
                        "b_",
                        data.pair_boundary(b),
                        min(view.layer, lm_b.n_layers - 1),
                        ui.clamp_head(view.head, lm_b),
                    )
                else:
                    st.info(ui.plain(f"{ui.title(p.key)} is not available for {name_b}.", None))


def draw_under(drawn: Panels, a, panels, labels: list[str], lm, boundary) -> None:
    """Under the maps, sized like them: the difference and the player side by side, then the focus bars."""
    view, fs, width, stem = drawn.view, drawn.fs, drawn.width, drawn.stem
    extra: list[tuple] = []  # (figure, tag, heading, explanation)
    by_key = {p.key: p for p in panels}
    if view.diff and all(k in by_key for k in view.diff):
        pa, pb = by_key[view.diff[0]], by_key[view.diff[1]]
        fig = viz.difference(
            pa.matrix,
            pb.matrix,
            pa.row_labels,
            name_a=ui.title(pa.key),
            name_b=ui.title(pb.key),
            positions=pa.index,
            causal=lm.is_causal,
            boundary=boundary,
            font_size=fs,
            present=view.present,
            width=width,
        )
        extra.append(
            (
                fig,
                "diff",
                "Difference A − B",
                f"Each row of A ({ui.title(pa.key)}) and of B ({ui.title(pb.key)}) as shares of the row, then "
                "A − B: red where A gives a token pair more than B, blue where less (0 = they agree).",
            )
        )
    if view.player and view.player in a:
        stack, keep = data.layer_stack(a, view.player, view.head, view.hide_special, view.values)
        fig = viz.layer_player(
            stack,
            [labels[i] for i in keep],
            title=f"{ui.title(view.player)} through the layers",
            positions=keep,
            causal=lm.is_causal,
            boundary=boundary,
            font_size=fs,
            present=view.present,
            colorbar_title=data.unit(view.player, view.values),
            start=view.layer,
            width=width,
        )
        extra.append(
            (
                fig,
                "player",
                "Layer player",
                "▶ plays the map from layer 0 to the last; drag the slider to "
                "stop at a layer. One colour scale for all layers, so colours compare across frames.",
            )
        )
    if extra:  # one row of panels, each the width of a main panel, its explanation under it
        for col, (fig, tag, heading, explanation) in zip(st.columns(2, gap="medium"), extra):
            with col:
                ui.chart(fig, key=f"panel_{tag}", filename=f"{stem}_{tag}")
                st.caption(ui.plain(f"{heading}: {explanation}", None))
            drawn.figures.append(fig)
            drawn.captions.append(f"{heading}: {explanation}")
    if view.focus is not None:
        rows = data.focus_rows(panels, view.focus)
        fig = viz.bars(
            rows,
            labels,
            [p.index for p in panels if view.focus in p.index],
            width=ui.main_width(),
            focus_label=f"{labels[view.focus]} [{view.focus}]",
            font_size=fs,
        )
        ui.chart(fig, key="focus_bars", filename=f"{stem}_focus")


def draw_export(drawn: Panels, a, panels, lm) -> None:
    """The export row: CSV and NPZ of the numbers shown, the whole view as one offline HTML file."""
    stem = drawn.stem
    st.caption(
        "Export: PNG or SVG (sidebar) from the camera icon in each chart's toolbar; the whole view as one "
        "HTML file that opens offline, hover included; the numbers shown above as CSV or NPZ."
        + (" " + data.CSV_MASKED_NOTE if lm.is_causal else "")
    )
    e1, e2, e3, _ = st.columns([1, 1, 1, 3])
    with e1:
        st.download_button(
            "Download CSV",
            lambda: data.panels_csv(panels, lm.is_causal),
            file_name=stem + ".csv",
            mime="text/csv",
            on_click="ignore",
        )
    with e2:
        st.download_button(
            "Download NPZ",
            lambda: data.panels_npz(panels, list(a.tokens)),
            file_name=stem + ".npz",
            mime="application/octet-stream",
            on_click="ignore",
        )
    with e3:
        st.download_button(
            "Download HTML",
            ui.view_html(drawn.figures, drawn.captions, lm.name, drawn.view),
            file_name=stem + ".html",
            mime="text/html",
            on_click="ignore",
        )

"""normviz · Translate: an encoder–decoder's cross-attention, weights vs norms, and the word alignment they imply.

Thin page: widgets, one cached session and its cross maps (:mod:`normviz.ui.kit.fetch`, as every page), alignments
from :mod:`normviz.align`, figures from :mod:`normviz.viz`; its regions: :mod:`normviz.ui.views.translate_regions`.
"""

from pathlib import Path

import streamlit as st

from normviz.align import align_analysis
from normviz.ui.kit import st_parts as ui
from normviz.ui.views import frame
from normviz.ui.views import translate_regions as R
from normviz.ui.views.translate import (
    CROSS_KEYS,
    TranslateView,
    not_encoder_decoder,
    toy_examples,
    unknown_words,
    unknown_words_note,
)

DATA = Path(__file__).resolve().parents[1] / "assets" / "toy_mt" / "data"
VIEW = R.VIEW
ui.page_config("Translate", "🔤", VIEW)


def page() -> None:
    view = ui.view_from_url(TranslateView, VIEW)
    ui.seed("tr_present", view.present)
    view.present = st.sidebar.toggle("Stage mode (larger fonts)", key="tr_present")
    ui.keep_widgets_across_stage(view.present, "tr_")
    ui.follow_theme(view)
    ui.apply_style(view.present)
    fs = ui.font_size(view.present)
    if not view.present:  # stage mode: one compact bar of controls, the panels right under it
        st.header("Translate: cross-attention and word alignment")
        st.caption(
            "Kobayashi et al. 2020 §5: the norms ‖α f(e)‖ of the source–target attention align words better "
            "than the weights α. Rows are the decoder's input tokens (target), columns the encoder's (source)."
        )
    examples = toy_examples(str(DATA))
    bar, more = R.draw_inputs(view, examples)
    R.save_view(view)
    if not view.model.strip():
        st.error("The model field is empty: type toy-mt or an encoder–decoder model.")
        st.stop()
    lm = frame.model(view.model.strip(), device=False)
    problem = not_encoder_decoder(lm)
    if problem:
        frame.stop_with("error", problem)
    frame.text(view.src, "The source is empty. Type a sentence to translate, or pick an example.")

    unknown = unknown_words(lm.tokenizer, view.src)
    if unknown:
        ui.say("warning", unknown_words_note(lm.name, len(lm.tokenizer), unknown, len(view.src.split()), examples))
    session = frame.session(lm, view.src, target=view.tgt)
    a = frame.maps(session, CROSS_KEYS)
    refused = [f"{k}: {a.refused[k]}" for k in CROSS_KEYS if k in a.refused]
    if refused:
        frame.stop_with("error", "; ".join(refused))
    target_note = str(a.notes.get("target", ""))
    if not view.tgt.strip() and not view.present:  # stage mode: under the panels
        ui.say("info", f"Generated translation: {a.target_text}")
    elif target_note:
        st.caption(ui.plain(f"Target: {target_note}"))
    sa = align_analysis(a, lm.tokenizer)

    R.draw_pickers(view, a, bar, more)
    shown = R.draw_panels(view, a, lm, fs)  # weights vs norms, side by side
    links = R.draw_alignment(view, sa, fs)
    R.draw_export(view, a, links, shown)


ui.run_page(page)

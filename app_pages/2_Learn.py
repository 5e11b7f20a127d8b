"""normviz · Learn: why a weight is not a contribution (on your sentence), then every map explained, with a
worked 3-token example computed live. The page composes its regions (:mod:`normviz.ui.views.learn_regions`; the
lessons' words and numbers: :mod:`normviz.ui.views.learn`)."""

import pandas as pd
import streamlit as st

from normviz.ui.kit import st_parts as ui
from normviz.ui.views import frame, learn, learn_circuit
from normviz.ui.views import learn_regions as R

ui.page_config("Learn", "🎓")
TEXT_KEYS = ("w_why_row",)  # every box that holds a position or a token of the text (ui.follow_text)


def page() -> None:
    view, fs = ui.start_page()
    ui.escape_key(view.present)  # Esc leaves stage mode (this page has no layer/head keys)

    if not view.present:  # stage mode starts with the lesson itself
        st.header("Learn: what each map measures")
        st.markdown(
            "A transformer layer mixes token vectors. **Attention weights** say where a head looks; the maps of "
            "Kobayashi et al. measure the **vectors** that actually move, through more and more of the layer: "
            "the attention heads, the residual connection, the layer normalisation, the feed-forward block. "
            "Every number below is computed now from the model in the sidebar."
        )
    lm = frame.model(view.model)
    if not view.present:
        with st.expander("The symbols used on this page", expanded=False):
            st.table(pd.DataFrame(learn.SYMBOLS, columns=["symbol", "meaning"]).set_index("symbol"))

    if learn_circuit.opens(view.lesson):  # ?lesson=induction: that lesson first, running (issue 41)
        learn_circuit.render(ui, st, fs, opened=True)
    R.why_weight_is_not_contribution(view, lm, fs, TEXT_KEYS)
    ui.save_view(view)
    R.draw_every_map(view, lm, fs)  # every map, on a 3-token text
    if not learn_circuit.opens(view.lesson):  # else drawn first, above
        learn_circuit.render(ui, st, fs)  # the lesson "find the induction circuit" (issue 41)


ui.run_page(page)

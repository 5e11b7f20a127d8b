"""normviz: the app's entry point (`streamlit run app.py`). It names the pages and runs the chosen one.

Every ``app_pages/<n>_<Name>.py`` is a page, in the order of ``n``; ``0_Explore.py`` is the default (the root URL),
the others live at ``/<Name>``. Each page also runs on its own (``AppTest.from_file("app_pages/1_Overview.py")``).
With ``NORMVIZ_TIMING=1`` each run's server time goes to stderr (``normviz-timing <time> <session> <page>
<seconds>``, :mod:`normviz.ui.timing`), which the real-browser test reads to split a redraw into server and
browser time.
"""
import time
from pathlib import Path

# pandas imported whole before a page draws: two first runs at once once met a half-imported pandas inside
# plotly's validators ('partially initialized module pandas has no attribute Series')
import pandas  # noqa: F401
import streamlit as st

from normviz.ui import timing
from normviz.ui.pages import discover
from normviz.ui.url_check import install as mark_dropped_queries

mark_dropped_queries()  # a query string Streamlit drops as too long is then said, not silently ignored

pages = discover(Path(__file__).parent / "app_pages")
nav = st.navigation([st.Page(str(p.path), title=p.title, icon=p.icon, url_path=p.url_path, default=p.default)
                     for p in pages])
t0 = time.perf_counter()
try:
    nav.run()
finally:
    timing.report("timing", nav.url_path or "Explore", f"{time.perf_counter() - t0:.4f}")

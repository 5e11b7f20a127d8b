"""normviz: the app's entry point (`streamlit run app.py`). It names the pages and runs the chosen one.

Every ``pages/<n>_<Name>.py`` is a page, in the order of ``n``; ``0_Explore.py`` is the default (the root URL),
the others live at ``/<Name>``. Each page also runs on its own (``AppTest.from_file("pages/1_Overview.py")``).
"""
from pathlib import Path

import streamlit as st

from normviz.ui.pages import discover

st.navigation([st.Page(str(p.path), title=p.title, icon=p.icon, url_path=p.url_path, default=p.default)
               for p in discover(Path(__file__).parent / "pages")]).run()

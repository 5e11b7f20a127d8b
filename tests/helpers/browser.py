"""The browser helpers (a Streamlit server, headless Chromium, timings): :mod:`normviz.devtools.browser`."""
from normviz.devtools.browser import *  # noqa: F401,F403
from normviz.devtools.browser import ROOT, _IDLE, _TITLES, _WATCH  # noqa: F401

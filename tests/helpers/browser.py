"""The browser helpers (a Streamlit server, headless Chromium, timings): :mod:`tools.browser`."""
from tools.browser import *  # noqa: F401,F403
from tools.browser import _IDLE, _TITLES, _WATCH, ROOT  # noqa: F401

"""Kept for scripts/screenshots.py, which imports tests.browser; the module is tests/helpers/browser.py."""
from .helpers.browser import *  # noqa: F401,F403
from .helpers.browser import chromium, find_browser, streamlit_server, wait_for_app  # noqa: F401

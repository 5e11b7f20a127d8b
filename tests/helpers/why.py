"""The Why page's AppTest set-up (test_app_why, test_app_depth, test_app_continuation; the page run once on
smollm2 is tests/app/conftest.py's ``why_page``)."""

from __future__ import annotations

import normviz
from normviz.ui.kit import st_parts

from .app import figures

PAGE = "app_pages/0_Why.py"
TEXT = "The capital of France is"


def smollm2():
    """smollm2 from the app's own model cache (the very model the page's run loaded)."""
    return st_parts.model_cache().get_or_compute("smollm2", lambda: normviz.load("smollm2"))


def by_kind(at) -> dict:
    """The page's figures by their ``layout.meta.normviz`` kind."""
    return {f["layout"].get("meta", {}).get("normviz"): f for f in figures(at)}

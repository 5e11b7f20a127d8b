"""Message boxes of the pages: visitor input shown as plain text, errors shortened (and redacted on a public
server)."""

from __future__ import annotations

import streamlit as st

from .safe import plain, redact
from .settings import settings


def shorten_error(exc: BaseException, limit: int = 300) -> str:
    text = str(exc)
    if settings().public:
        text = redact(text)
    return text if len(text) <= limit else text[:limit] + "…"


def say(kind: str, message: str) -> None:
    """``st.error``/``warning``/``info`` of a message that may hold visitor input: shown as plain text."""
    getattr(st, kind)(plain(message, limit=1200))

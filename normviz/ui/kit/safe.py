"""Text from visitors (URL parameters, typed text, model names, file names, tokens) shown without markup.

Streamlit renders the body of ``st.markdown``, ``st.caption``, ``st.info/warning/error``, status labels and
widget labels as GitHub-flavoured Markdown. Anything a visitor chose goes through :func:`plain` (inert
Markdown: every ASCII punctuation mark backslash-escaped, line breaks flattened, and the bare-URL / e-mail
autolinks of GFM broken with an invisible word joiner, because remark-gfm finds those in the *unescaped*
text) or :func:`lit` (a code span, which Markdown never links). No module of the app builds Markdown from a
visitor's string any other way.
"""

from __future__ import annotations

import re

_PUNCT = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&%^=\"'/?;,])")
_WJ = "\u2060"  # WORD JOINER: invisible, keeps "http⁠://…" and "www⁠.…" from being autolinked
_AUTOLINK = re.compile(r"(?i)(https?|ftp|mailto|xmpp|www)(?=\\?[:.])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_PATH = re.compile(r"(?<![\w.])(?:/[\w.\-+@~]+){2,}/?")


def shorten(text: str, limit: int = 120) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def plain(text, limit: int | None = 400) -> str:
    """``text`` as Markdown that renders as exactly these characters (cut at ``limit``): no link, image,
    emphasis, heading, HTML, math or Streamlit directive can come out of it."""
    s = _CONTROL.sub(" ", str(text))
    if limit is not None:
        s = shorten(s, limit)
    s = _PUNCT.sub(r"\\\1", s)
    s = _AUTOLINK.sub(lambda m: m.group(1) + _WJ, s)
    return s.replace("@", _WJ + "@")


def lit(value, limit: int = 80) -> str:
    """A visitor's value as a Markdown code span (quoted like repr would, cut at ``limit``)."""
    s = _CONTROL.sub(" ", str(value))
    s = shorten(s, limit)
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def public(env=None) -> bool:
    """``NORMVIZ_PUBLIC=1``: a public deployment (no error details, no server paths, embedded models only
    unless ``NORMVIZ_ALLOWED_MODELS`` says otherwise)."""
    from ...core import settings

    return settings.flag("NORMVIZ_PUBLIC", env)


def redact(text: str) -> str:
    """Absolute server paths replaced by ``<path>`` (for messages on a public deployment)."""
    return _PATH.sub("<path>", str(text))

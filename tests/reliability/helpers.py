"""Small helpers of the reliability suite (copied here on purpose: this directory depends on no other test module)."""

from __future__ import annotations

import re
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["app.py", "app_pages/1_Overview.py", "app_pages/2_Learn.py", "app_pages/3_Corpus.py"]
TIMEOUT = 240
MARKER = "evil.example"
PAYLOADS = [
    f"[Verify your account](http://{MARKER}/login)",
    f"![x](http://{MARKER}/p.png)",
    f"<a href='http://{MARKER}/'>click</a><img src='http://{MARKER}/i.png'>",
    f"see www.{MARKER} or https://{MARKER}/x or me@{MARKER}",
    f"[a]: http://{MARKER}/ref\n\n[a] :red[big] $x$ **b** `c`",
]
# element types whose text is shown as is (never Markdown)
PLAIN_TYPES = {"text", "code", "plotly_chart", "arrow_data_frame", "dataframe", "json", "exception", "download_button"}
MD_FIELDS = {"body", "label", "help", "options", "caption", "formattedOptions"}
_MD = MarkdownIt("commonmark")
_GFM_URL = re.compile(r"(?i)(?:https?://|www\.)[^\s]*" + re.escape(MARKER) + r"|[-.\w+]+@[-\w]*" + re.escape(MARKER))


def app(page: str, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / page), default_timeout=TIMEOUT)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at


def elements(node, in_expander: bool = False, with_flag: bool = False):
    """Every leaf element of the page (with ``with_flag``: (element, inside a collapsed expander))."""
    children = getattr(node, "children", None)
    if children:
        here = in_expander or (getattr(node, "type", None) == "expander" and not node.proto.expanded)
        for child in children.values() if isinstance(children, dict) else children:
            yield from elements(child, here, with_flag)
    if getattr(node, "proto", None) is not None and not children:
        yield (node, in_expander) if with_flag else node


def keyed_strings(obj, key=None):
    """Every string in a nested dict/list (a figure's or element's JSON), with the key of the field it sits in
    (a list's items inherit their list's key)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from keyed_strings(v, k)
    elif isinstance(obj, list):
        for v in obj:
            yield from keyed_strings(v, key)
    elif isinstance(obj, str):
        yield key, obj


def _strings(obj, key=None):
    """The strings of ``obj`` that sit in Markdown fields (``key``: the field ``obj`` itself sits in)."""
    return (text for k, text in keyed_strings(obj, key) if k in MD_FIELDS)


def details_shown(at: AppTest) -> bool:
    """Whether the page shows an error's details (the collapsed "Details" section)."""
    return any(b.label == "Details" and not b.proto.expanded for b in at.expander)


def markup_hits(at: AppTest, marker: str = MARKER) -> list[str]:
    """Links, images, raw HTML or GFM autolinks to ``marker`` that Streamlit would render from the page's
    Markdown-bearing texts (alert bodies, markdown, captions, labels, help, options)."""
    hits = []
    for el in elements(at._tree):
        if el.type in PLAIN_TYPES:
            continue
        try:
            d = MessageToDict(el.proto)
        except Exception:
            continue
        for text in _strings(d):
            for tok in _MD.parse(text):
                for t in [tok] + list(tok.children or []):
                    attrs = " ".join(str(v) for v in (t.attrs or {}).values())
                    if t.type in ("link_open", "image") and marker in attrs:
                        hits.append(f"{el.type}: {t.type} {attrs} in {text[:80]!r}")
                    if t.type in ("html_inline", "html_block") and marker in t.content:
                        hits.append(f"{el.type}: raw HTML {t.content[:60]!r}")
                    if t.type == "text" and _GFM_URL.search(t.content):
                        hits.append(f"{el.type}: autolink {t.content[:80]!r}")
    return hits


def tracebacks(at: AppTest) -> list[str]:
    """Anything that shows a visitor a traceback: exception elements, or texts that contain one."""
    out = [e.value for e in at.exception]
    for el, collapsed in elements(at._tree, with_flag=True):
        if collapsed:
            continue
        for text in _strings(MessageToDict(el.proto), "body"):
            if "Traceback (most recent call last)" in text or 'File "/' in text:
                out.append(text[:200])
    return out


def messages(at: AppTest) -> list[str]:
    return [e.value for e in list(at.error) + list(at.warning) + list(at.info)]

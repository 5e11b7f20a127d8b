"""The app's pages: every ``app_pages/<n>_<Name>.py``, ordered by ``n`` (then name: ``0_Why`` follows
``0_Explore``); the first is the default (root URL).

Pure Python (no Streamlit import): ``app.py`` turns these into ``st.Page`` objects, so a new page file needs
no edit anywhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# Material icons (Streamlit bundles the font: they show in any browser, unlike emoji without an emoji font)
ICONS = {
    "Explore": ":material/search:",
    "Overview": ":material/grid_view:",
    "Learn": ":material/school:",
    "Corpus": ":material/library_books:",
    "Translate": ":material/translate:",
    "Why": ":material/help:",
    "Trust": ":material/verified:",
}
_NAME = re.compile(r"^(\d+)_(\w+)\.py$")


@dataclass(frozen=True)
class PageFile:
    path: Path
    title: str  # what the sidebar shows
    url_path: str  # "" for the default page
    icon: str | None
    default: bool


def discover(folder: Path) -> list[PageFile]:
    found = []
    for p in Path(folder).glob("*.py"):
        m = _NAME.match(p.name)
        if m:
            found.append((int(m.group(1)), m.group(2), p))
    found.sort()
    out = []
    for i, (_, name, path) in enumerate(found):
        title = name.replace("_", " ")
        out.append(PageFile(path, title, "" if i == 0 else name, ICONS.get(title), i == 0))
    return out

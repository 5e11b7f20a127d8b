"""Read a corpus file: one sentence, or a sentence pair separated by one tab, per line.

Lines are kept as raw bytes with their 1-based line numbers and decoded later, per chunk, so a line that
is not valid UTF-8 is reported with its number instead of failing the whole file.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import NormvizError
from ..core.inputs import check_encoding  # noqa: F401  (its home is normviz.core.inputs; align reads files with it too)


@dataclass(frozen=True)
class Item:
    line: int  # 1-based line number in the input file
    text: str
    pair: str | None


class BadLine(Exception):
    """A line that cannot be analysed; the message says why."""


def read_lines(path, limit: int | None = None) -> list[tuple[int, bytes]]:
    """``[(line_number, raw_bytes)]`` of the file, at most ``limit`` lines."""
    p = Path(path)
    if p.is_dir():
        raise NormvizError(
            f"--input {str(path)!r} is a directory, not a file. Pass a text file with one sentence "
            "per line (sentence pairs separated by a tab)."
        )
    if not p.is_file():
        raise NormvizError(
            f"Corpus file {str(path)!r} not found. Pass a text file with one sentence per line "
            "(sentence pairs separated by a tab)."
        )
    check_encoding(p)
    out = []
    with p.open("rb") as fh:
        for i, raw in enumerate(fh, start=1):
            if limit is not None and i > limit:
                break
            out.append((i, raw.rstrip(b"\r\n")))
    return out


def parse_line(line: int, raw: bytes) -> Item:
    """Decode and split one line; raise :class:`BadLine` for undecodable, empty or malformed lines."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadLine(f"not valid UTF-8 (byte {exc.start})") from None
    text = text.lstrip("\ufeff") if line == 1 else text
    if not text.strip():
        raise BadLine("empty line")
    if not any(not unicodedata.category(c).startswith(("C", "Z")) for c in text):
        raise BadLine("no visible character (only control or format characters)")
    parts = text.split("\t")
    if len(parts) > 2:
        raise BadLine(f"{len(parts) - 1} tabs; a line holds one sentence or two separated by one tab")
    first = parts[0].strip()
    second = parts[1].strip() if len(parts) == 2 else None
    if not first:
        raise BadLine("empty first sentence before the tab")
    return Item(line, first, second or None)


def file_digest(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

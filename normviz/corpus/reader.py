"""Read a corpus file: one sentence, or a sentence pair separated by one tab, per line.

Lines are kept as raw bytes with their 1-based line numbers and decoded later, per chunk, so a line that
is not valid UTF-8 is reported with its number instead of failing the whole file.
"""
from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ..errors import NormvizError


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
        raise NormvizError(f"--input {str(path)!r} is a directory, not a file. Pass a text file with one sentence "
                           "per line (sentence pairs separated by a tab).")
    if not p.is_file():
        raise NormvizError(f"Corpus file {str(path)!r} not found. Pass a text file with one sentence per line "
                           "(sentence pairs separated by a tab).")
    check_encoding(p)
    out = []
    with p.open("rb") as fh:
        for i, raw in enumerate(fh, start=1):
            if limit is not None and i > limit:
                break
            out.append((i, raw.rstrip(b"\r\n")))
    return out


_BOMS = [(b"\x00\x00\xfe\xff", "UTF-32 (big-endian)"), (b"\xff\xfe\x00\x00", "UTF-32 (little-endian)"),
         (b"\xfe\xff", "UTF-16 (big-endian)"), (b"\xff\xfe", "UTF-16 (little-endian)")]


def check_encoding(path: Path, probe: int = 1 << 16) -> None:
    """Refuse, with a message, files that would be read silently and wrongly line by line: UTF-16/UTF-32 (with
    or without a byte-order mark) and files with old-Mac CR-only line ends."""
    with path.open("rb") as fh:
        head = fh.read(probe)
    for bom, name in _BOMS:
        if head.startswith(bom):
            raise NormvizError(f"{str(path)!r} is {name} text (byte-order mark {bom.hex(' ').upper()}); save it as "
                               f"UTF-8, e.g. iconv -f {name.split()[0]} -t UTF-8 {path.name} > {path.stem}.utf8.txt")
    if head and head.count(b"\x00") > len(head) // 8:
        raise NormvizError(f"{str(path)!r} holds many NUL bytes: it looks like UTF-16 or a binary file; pass UTF-8 "
                           "text with one sentence per line.")
    if b"\r" in head and b"\n" not in head:
        raise NormvizError(f"{str(path)!r} ends its lines with CR only (old Mac style), so it would read as one line; "
                           f"convert it first, e.g. tr '\\r' '\\n' < {path.name} > {path.stem}.lf.txt")


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

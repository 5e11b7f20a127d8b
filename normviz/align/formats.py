"""Word-alignment files: one sentence a line, links separated by spaces.

- **Pharaoh** (fast_align, awesome-align, SimAlign): 0-based ``i-j`` (source word i, target word j) sure links;
  possible links written ``i?j`` (or ``i-j-P``, with ``i-j-S`` for sure).
- **talp** (the Vilar et al. / RWTH gold sets used by Kobayashi et al. 2020): 1-based ``i-j`` sure, ``ipj``
  possible, source index first.

Every reader returns 0-based ``(source, target)`` pairs: ``sure`` and ``possible`` (possible ⊇ sure).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..core.errors import NormvizError

FORMATS = ("pharaoh", "talp")
_LINK = re.compile(r"^(\d+)([-?p])(\d+)(?:-([SP]))?$")
MAX_DIGITS = 9  # a word index of more digits is no sentence's (and int() refuses over 4,300 digits)


class AlignmentFormatError(NormvizError):
    """A link that is not ``i-j``, ``i?j``, ``ipj`` or ``i-j-S/P``."""


def parse_line(line: str, fmt: str = "pharaoh") -> tuple[set, set]:
    """``(sure, possible)`` of one line; ``fmt`` "pharaoh" (0-based) or "talp" (1-based)."""
    if fmt not in FORMATS:
        raise NormvizError(f"unknown alignment format {fmt!r}; use one of {', '.join(FORMATS)}.")
    base = 1 if fmt == "talp" else 0
    sure, possible = set(), set()
    for item in line.split():
        m = _LINK.match(item)
        if not m or (m.group(4) and m.group(2) != "-"):
            raise AlignmentFormatError(f"{_short(item)!r} is not a link (expected i-j, i?j, ipj or i-j-S/P)")
        if max(len(m.group(1)), len(m.group(3))) > MAX_DIGITS:
            raise AlignmentFormatError(
                f"{_short(item)!r}: a word index of {max(len(m.group(1)), len(m.group(3))):,} digits"
            )
        i, j = int(m.group(1)) - base, int(m.group(3)) - base
        if i < 0 or j < 0:
            raise AlignmentFormatError(f"{item!r}: index 0 in a 1-based (talp) file")
        link = (i, j)
        possible.add(link)
        if m.group(2) == "-" and m.group(4) != "P":
            sure.add(link)
    return sure, possible


def _short(item: str, limit: int = 40) -> str:
    return item if len(item) <= limit else item[:limit] + f"… ({len(item):,} characters)"


def read_text_file(path: str | Path, what: str) -> bytes:
    """The bytes of a UTF-8 text file ``what`` (``--src`` …) without its UTF-8 byte-order mark; a one-line
    NormvizError for a file that cannot be read or is UTF-16/UTF-32 or binary (named as such, with or
    without a byte-order mark: :func:`normviz.core.inputs.check_encoding`)."""
    from ..core.inputs import check_encoding

    p = Path(path)
    try:
        check_encoding(p)
        raw = p.read_bytes()
    except OSError as exc:
        raise NormvizError(f"cannot read {what} {str(p)!r}: {exc.strerror or exc}.") from None
    except NormvizError as exc:
        raise NormvizError(f"{what}: {exc}") from None
    return raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw


def guess_format(lines: list[str]) -> str:
    """talp when some link uses the ``p`` separator, else Pharaoh (a 1-based file with only sure links cannot
    be told apart; its out-of-range links are reported with a hint)."""
    return "talp" if any(re.search(r"\dp\d", ln) for ln in lines) else "pharaoh"


def read_alignments(path: str | Path, fmt: str = "auto") -> tuple[list[tuple[set, set] | None], list, str]:
    """All lines of an alignment file: ``(entries, bad, fmt)`` with ``entries[k]`` the ``(sure, possible)`` of
    line k+1 (None where it could not be read), ``bad`` the ``(line_number, reason)`` of those lines, and
    the format used (``auto`` resolved by :func:`guess_format`)."""
    raw = read_text_file(path, "--gold")  # UTF-16/32 refused by name, a UTF-8 byte-order mark dropped
    lines = raw.decode("utf-8", errors="replace").splitlines()
    if fmt == "auto":
        fmt = guess_format(lines)
    entries, bad = [], []
    for k, line in enumerate(lines, 1):
        try:
            entries.append(parse_line(line, fmt))
        except AlignmentFormatError as exc:
            entries.append(None)
            bad.append((k, f"gold alignment: {exc}"))
    return entries, bad, fmt


def format_pharaoh(links) -> str:
    """``"i-j i-j …"``, 0-based, sorted by target then source word."""
    return " ".join(f"{s}-{t}" for s, t in sorted(links, key=lambda x: (x[1], x[0])))

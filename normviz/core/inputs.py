"""Checks of what a user passes on the command line, done before any model is loaded: one clear message each.

Every check raises :class:`normviz.core.errors.NormvizError` (the CLI prints it on one line and exits with 2).
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from .errors import EmptyInputError, NormvizError

MAX_MODEL_NAME = 256


def check_text(text: str | None, what: str = "--text", allow_empty: bool = False) -> None:
    """Valid UTF-8 (the shell hands Python undecodable bytes as surrogates) and at least one visible character;
    ``allow_empty``: "" passes (an optional text whose emptiness means none, e.g. --text-pair, --target)."""
    if text is None or text == "" and allow_empty:
        return
    if text == "":
        raise EmptyInputError(f"{what} is empty; pass a sentence to analyse.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raw = os.fsencode(text)
        try:
            raw.decode("utf-8")
            offset = len(text[: exc.start].encode("utf-8", "surrogateescape"))
        except UnicodeDecodeError as dec:
            offset = dec.start
        raise NormvizError(f"{what} is not valid UTF-8 (byte {offset}); pass UTF-8 text.") from None
    if not any(not unicodedata.category(c).startswith(("C", "Z")) for c in text):
        raise EmptyInputError(
            f"{what} has no visible character (only spaces or control characters); pass a sentence to analyse."
        )


def check_model_name(name: str) -> None:
    if not name.strip():
        raise NormvizError("--model is empty; pass minilm, smollm2, a Hub id or a model directory.")
    if len(name) > MAX_MODEL_NAME or "\x00" in name:
        raise NormvizError(
            f"--model is {len(name)} characters long; a model name or path has at most "
            f"{MAX_MODEL_NAME} (minilm, smollm2, a Hub id or a model directory)."
        )


def check_device(device: str | None) -> None:
    """cpu, cuda, cuda:N, mps — and available here."""
    if device is None:
        return
    from .backend import pick_device

    pick_device(device)


def check_max_tokens(n: int | None, what: str = "--max-tokens") -> None:
    if n is not None and n < 2:
        raise NormvizError(f"{what} must be at least 2 (a sequence needs two tokens to mix), got {n}.")


def output_file(out: str, suffix: str = ".npz") -> Path:
    """The file that will really be written for ``--out`` (numpy appends ``.npz`` to other names), checked
    writable now: not a directory, its folder exists and can be written."""
    if not out or not out.strip():
        raise NormvizError("--out is empty; pass a file name such as maps.npz.")
    p = Path(out).expanduser()
    if p.is_dir():
        raise NormvizError(f"--out {out!r} is a directory; pass a file name such as {str(p / ('maps' + suffix))!r}.")
    if p.suffix != suffix:
        p = p.with_name(p.name + suffix)
        if p.is_dir():
            raise NormvizError(f"--out {out!r} would be written as {str(p)!r}, which is a directory.")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise NormvizError(f"--out {out!r}: the folder {str(parent)!r} does not exist; create it first.")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise NormvizError(f"--out {out!r}: {str(p)!r} cannot be written (permission denied).")
    return p


def output_dir(out: str) -> Path:
    """A directory for results: it may not exist yet, but must not be a file, and must be creatable/writable."""
    p = Path(out).expanduser()
    if p.exists() and not p.is_dir():
        raise NormvizError(f"--out {out!r} is a file; pass a directory (it is created if missing).")
    probe = p
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not os.access(probe, os.W_OK):
        raise NormvizError(f"--out {out!r}: {str(probe)!r} cannot be written (permission denied).")
    return p


def parse_options(items: list[str]) -> dict:
    """``--option KEY=VALUE`` items as a typed dict: :func:`normviz.core.settings.parse_options` (unknown or
    ill-typed: a one-line NormvizError)."""
    from . import settings

    return settings.parse_options(items)


_BOMS = [
    (b"\x00\x00\xfe\xff", "UTF-32 (big-endian)"),
    (b"\xff\xfe\x00\x00", "UTF-32 (little-endian)"),
    (b"\xfe\xff", "UTF-16 (big-endian)"),
    (b"\xff\xfe", "UTF-16 (little-endian)"),
]


def _nul_guess(head: bytes) -> str:
    """What a file with many NUL bytes probably is, from where its NULs sit (ASCII text in UTF-16/32)."""
    n = len(head) - len(head) % 4
    if n >= 4:
        quads = [head[k:n:4].count(0) / (n // 4) for k in range(4)]
        if min(quads[1:3]) > 0.9 and (quads[0] > 0.9 or quads[3] > 0.9):
            return "it looks like UTF-32 without a byte-order mark"
        even = (quads[0] + quads[2]) / 2
        odd = (quads[1] + quads[3]) / 2
        if odd > 0.6 and even < 0.2:
            return "it looks like UTF-16 (little-endian) without a byte-order mark"
        if even > 0.6 and odd < 0.2:
            return "it looks like UTF-16 (big-endian) without a byte-order mark"
    return "it looks like a binary file"


def check_encoding(path: Path, probe: int = 1 << 16) -> None:
    """Refuse, with a message, files that would be read silently and wrongly line by line: UTF-16/UTF-32 (with
    or without a byte-order mark) and files with old-Mac CR-only line ends."""
    with path.open("rb") as fh:
        head = fh.read(probe)
    for bom, name in _BOMS:
        if head.startswith(bom):
            raise NormvizError(
                f"{str(path)!r} is {name} text (byte-order mark {bom.hex(' ').upper()}); save it as "
                f"UTF-8, e.g. iconv -f {name.split()[0]} -t UTF-8 {path.name} > {path.stem}.utf8.txt"
            )
    if head and head.count(b"\x00") > len(head) // 8:
        raise NormvizError(
            f"{str(path)!r} holds many NUL bytes: {_nul_guess(head)}; pass UTF-8 text with one "
            "sentence per line (e.g. iconv -t UTF-8)."
        )
    if b"\r" in head and b"\n" not in head:
        raise NormvizError(
            f"{str(path)!r} ends its lines with CR only (old Mac style), so it would read as one line; "
            f"convert it first, e.g. tr '\\r' '\\n' < {path.name} > {path.stem}.lf.txt"
        )

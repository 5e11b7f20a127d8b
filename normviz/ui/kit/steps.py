"""A talk's steps (bookmarks): named views — layer, head and maps — of one text, kept in the URL so a talk is
one link (``steps=Weights~0~all~attention+norm;Deep~5~3~norm``: name~layer~head~maps, ``;`` between steps).
Pure Python (no Streamlit import); :mod:`normviz.ui.kit.stage` walks them (PageDown/PageUp, n/p in stage mode).

A ``+`` typed into a link arrives as a space (the query string's form encoding): the maps are split on ``+``,
spaces and commas alike, so ``attention+norm`` works unescaped as well as ``attention%2B norm``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_STEPS = 30
MAX_NAME = 40
_KEY = re.compile(r"^[a-z][a-z0-9_]{0,60}$")
_UNSAFE = re.compile(r"[~;+\x00-\x1f]")
_MAP_SEP = re.compile(r"[+,\s]+")


@dataclass(frozen=True)
class Step:
    name: str
    layer: int
    head: int | None  # None: all heads
    maps: tuple[str, ...]

    def encode(self) -> str:
        head = "all" if self.head is None else str(self.head)
        return "~".join((clean_name(self.name), str(self.layer), head, "+".join(self.maps)))


def clean_name(name: str) -> str:
    """A step's name as the URL keeps it: without the separators ``~ ; +`` and control characters, at most
    40 characters (empty: "step")."""
    return " ".join(_UNSAFE.sub(" ", str(name)).split())[:MAX_NAME] or "step"


def encode(steps: tuple[Step, ...]) -> str:
    return ";".join(s.encode() for s in steps)


def decode(raw: str) -> tuple[Step, ...]:
    """The steps of a link's ``steps=``; raises ValueError (saying what is wrong) when a step can't be read."""
    read = decode_each(raw)
    if read.problems:
        raise ValueError("; ".join(read.problems))
    return read.steps


@dataclass(frozen=True)
class StepsRead:
    """The steps of a link that could be read, and one message per step that could not."""

    steps: tuple[Step, ...]
    problems: tuple[str, ...]


def decode_each(raw: str) -> StepsRead:
    """Each step of ``steps=`` on its own: a malformed step is left out with a message naming it (its number
    and text), the others kept."""
    out, problems = [], []
    parts = [p for p in raw.split(";") if p.strip()]
    for i, part in enumerate(parts, 1):
        try:
            out.append(_decode_one(part))
        except ValueError as exc:
            problems.append(f"step {i} ({_short(part)!r}) was left out: {exc}")
    if len(out) > MAX_STEPS:
        problems.append(f"at most {MAX_STEPS} steps: the {len(out) - MAX_STEPS} after the {MAX_STEPS}th were left out")
        out = out[:MAX_STEPS]
    return StepsRead(tuple(out), tuple(problems))


def _short(text: str, limit: int = 50) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _decode_one(part: str) -> Step:
    bits = part.split("~")
    if len(bits) != 4:
        raise ValueError("each step is name~layer~head~maps (e.g. Weights~0~all~attention+norm)")
    name, layer, head, maps = bits
    if not layer.strip().isdigit() or len(layer.strip()) > 4:
        raise ValueError("the layer is not a whole number ≥ 0")
    if head.strip().lower() != "all" and (not head.strip().isdigit() or len(head.strip()) > 4):
        raise ValueError("the head is 'all' or a whole number ≥ 0")
    keys = tuple(k for k in _MAP_SEP.split(maps.strip()) if k)
    if not keys or not all(_KEY.match(k) for k in keys):
        raise ValueError("name its maps as map keys joined by + (e.g. attention+norm)")
    return Step(
        clean_name(name), int(layer), None if head.strip().lower() == "all" else int(head), tuple(dict.fromkeys(keys))
    )


def following(steps: tuple[Step, ...], current: int | None, delta: int) -> int | None:
    """The index of the step ``delta`` after ``current`` (None: before the first), clamped; None without steps."""
    if not steps:
        return None
    start = -1 if current is None and delta > 0 else (len(steps) if current is None else current)
    return min(max(start + delta, 0), len(steps) - 1)

"""The pages' URL query parameters, declared like settings (:class:`normviz.core.settings.Setting`): each view field
says its kind, range and choices once (:func:`url`, in the view's dataclass), and one codec reads and writes every
page's parameters (:func:`decode`, :func:`encode`).

:func:`decode` never raises: a malformed value gives the field's default (or the view's current value) and a line
saying why; a number outside its range is clamped to it, except a negative one below a range, which (a head or a
position of -3 is no nearby index) falls back too. Kinds:

    text    a visitor's text, kept as typed (the view cuts it at the deployment's length)
    str     a name (``model``), as typed; ``required``: not blank
    flag    1/0 (true/false, yes/no, on/off)
    int     a whole number in ``lo`` … ``hi``
    float   a number in ``lo`` … ``hi``, rounded to ``digits``
    choice  one of ``choices`` (``fold``: "lower"/"upper" before comparing)
    keys    comma-separated names (map keys), blanks dropped
    custom  ``parse(raw)`` gives the value (raises ValueError saying what to do); ``write(value)`` its text

``none``: the words that mean None (``all`` heads, the ``last`` position; the first is how None is written);
``check(value)``: a last check (raises ValueError); ``limit``: the longest raw value read (a text field is cut by
its view instead).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

KINDS = ("text", "str", "flag", "int", "float", "choice", "keys", "custom")
YES = ("1", "true", "yes", "on")
NO = ("0", "false", "no", "off")
NUMBER_CHARS = 12  # a longer number is no number a link needs


@dataclass(frozen=True)
class UrlField:
    """One query parameter of a view: its kind, default, range and choices (see the module's docstring)."""

    kind: str
    default: Any
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    fold: str | None = None  # "lower" | "upper": a choice's case before comparing
    none: tuple[str, ...] = ()  # words that mean None; none[0] writes it
    digits: int | None = None  # a float rounded to
    required: bool = False  # a str that must not be blank
    strip: bool = False  # a str read without its outer spaces
    limit: int = 1000  # the longest raw value read
    parse: Callable[[str], Any] | None = None  # kind custom
    write: Callable[[Any], str] | None = None  # kind custom
    check: Callable[[Any], None] | None = None  # a last check, raises ValueError

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind == "choice" and self.default not in self.choices:
            raise ValueError(f"default {self.default!r} is not one of {self.choices}")
        if self.kind == "custom" and (self.parse is None or self.write is None):
            raise ValueError("a custom field gives parse and write")


def url(default: Any, kind: str, **declared: Any) -> Any:
    """A view dataclass's field with its URL declaration (``layer: int = url(0, "int")``): the default is
    declared once, here."""
    spec = UrlField(kind, default, **declared)
    if isinstance(default, (list, dict, set)):  # pragma: no cover - views hold tuples
        raise TypeError("a URL field's default is immutable")
    return dataclasses.field(default=default, metadata={"url": spec})


def spec_of(cls: type, name: str) -> UrlField | None:
    """The declaration of ``cls``'s field ``name`` (None: not a URL field)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f.metadata.get("url")
    return None


def specs(cls: type) -> dict[str, UrlField]:
    """Every URL field of the view dataclass ``cls``, in its order."""
    return {f.name: f.metadata["url"] for f in dataclasses.fields(cls) if "url" in f.metadata}


def encode(spec: UrlField, value: Any) -> str:
    """``value``'s query-string form (what :func:`decode` reads back as ``value``)."""
    if value is None:
        return spec.none[0] if spec.none else ""
    if spec.kind == "custom":
        assert spec.write is not None
        return spec.write(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


def _number(spec: UrlField, text: str) -> int | float:
    what = "whole number" if spec.kind == "int" else "number"
    if len(text) > NUMBER_CHARS:
        raise ValueError(f"not a {what}")
    try:
        value: int | float = int(text) if spec.kind == "int" else float(text)
    except ValueError:
        raise ValueError(f"not a {what}") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        if spec.digits is not None:
            value = round(value, spec.digits)
    return value


def _range(spec: UrlField) -> str:
    lo = "" if spec.lo is None else f"{spec.lo:g}"
    hi = "" if spec.hi is None else f"{spec.hi:g}"
    return f"from {lo} to {hi}" if lo and hi else f"{lo} or more" if lo else f"{hi} or less"


def _read(spec: UrlField, raw: str) -> Any:
    """The value of ``raw``, or ValueError saying what to write instead."""
    text = raw.strip()
    if spec.none and text.lower() in spec.none:
        return None
    if spec.kind == "text":
        return raw
    if spec.kind == "str":
        if spec.required and not text:
            raise ValueError("it is empty")
        return text if spec.strip else raw
    if spec.kind == "flag":
        if text.lower() in YES:
            return True
        if text.lower() in NO:
            return False
        raise ValueError("use 1 or 0")
    if spec.kind in ("int", "float"):
        return _number(spec, text)
    if spec.kind == "choice":
        folded = text.lower() if spec.fold == "lower" else text.upper() if spec.fold == "upper" else raw
        if folded not in spec.choices:
            shown = [c for c in spec.choices if c]
            listed = " or ".join(shown) if len(shown) == 2 else f"one of {', '.join(shown)}"
            raise ValueError(f"use {listed}" + (", or leave it out" if "" in spec.choices else ""))
        return folded
    if spec.kind == "keys":
        return tuple(k.strip() for k in raw.split(",") if k.strip())
    assert spec.parse is not None
    return spec.parse(raw)


class Read(NamedTuple):
    """What :func:`decode` made of a raw value: the value to use, and why the raw text was not taken as it is
    (None: it was); ``clamped``: the value is the raw number brought into range (else the fallback)."""

    value: Any
    why: str | None = None
    clamped: bool = False


_UNSET: Any = object()


def decode(spec: UrlField, raw: str, current: Any = _UNSET) -> Read:
    """``raw`` read as ``spec``'s value. Never raises: a malformed value gives ``current`` (default: the field's
    default) with why; a number outside its range is clamped to it, but a negative one below the range gives
    ``current`` too."""
    fallback = spec.default if current is _UNSET else current
    if len(raw) > spec.limit and spec.kind != "text":
        return Read(fallback, f"{len(raw):,} characters is too long (at most {spec.limit:,})")
    try:
        value = _read(spec, raw)
        if value is not None and spec.kind in ("int", "float") and not _inside(spec, value):
            if spec.lo is not None and value < spec.lo and value < 0:
                raise ValueError(
                    f"use a number {_range(spec)}"
                    + (f", or {spec.none[0]}" if spec.none[0:1] != ("",) and spec.none else "")
                )
            lo = value if spec.lo is None else spec.lo
            hi = value if spec.hi is None else spec.hi
            clamped = type(value)(min(max(value, lo), hi))
            return Read(clamped, f"use a number {_range(spec)}", clamped=True)
        if value is not None and spec.check is not None:
            spec.check(value)
        return Read(value)
    except ValueError as exc:
        return Read(fallback, str(exc))
    except Exception as exc:  # a custom parse that fails otherwise is still only a bad link
        return Read(fallback, f"not read ({type(exc).__name__})")


def _inside(spec: UrlField, value: float) -> bool:
    return (spec.lo is None or value >= spec.lo) and (spec.hi is None or value <= spec.hi)

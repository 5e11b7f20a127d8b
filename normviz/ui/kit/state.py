"""The view shown by the app, and its round trip through the URL query string.

Every field has a query-string form so a copied link reproduces the view. Parsing never raises: a bad value
falls back to the default and is reported in ``problems`` so the page can say what it ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Mapping

from .settings import settings

DEFAULT_TEXT = "The cat sat on the mat because it was tired."
DEFAULT_MODEL = "minilm"
# The first view: the 2020/2021 papers' progression (weights → norms → + residual → + norm), all from the one
# recorded pass and the fused norm kernels (~1.3× the forward pass); the FF maps (O(n²·d·d_ff)) are opt-in.
DEFAULT_MAPS = ("attention", "norm", "attn_res", "attn_res_ln")
VALUE_MODES = ("share", "raw")  # row shares (rows sum to 1) | the map's own values
DRAW_MODES = ("heatmap", "lines")  # a matrix of cells | bertviz-style token columns joined by lines
COMPARE_MODES = ("none", "text", "model")  # side by side: nothing | a second text | a second model
DEFAULT_TOKEN_CAP = 128


class QueryView:
    """The one URL codec of every page's view (a dataclass subclass; ``problems`` is its last field).

    :meth:`to_query` writes the fields that differ from the defaults (``cls.encode``); :meth:`from_query` reads
    them back and never raises: a bad value keeps the current one and is reported in ``problems``. Fields named
    in ``TEXT_FIELDS`` (visitor text) are cut at ``max_text_chars`` with a note; any other value longer than
    ``LIMITS.get(name, 1000)`` characters is ignored with a note. A subclass gives ``decode(name, raw)`` (raises
    ValueError with what to do) and may ``encode(name, value)`` and ``accept(name, value)`` (a last check)."""

    TEXT_FIELDS: tuple[str, ...] = ()
    LIMITS: dict[str, int] = {}
    problems: list[str]

    @staticmethod
    def encode(name: str, value) -> str:
        return encode_value(value)

    @staticmethod
    def decode(name: str, raw: str):  # pragma: no cover - every subclass gives its own
        raise ValueError("unknown field")

    def accept(self, name: str, value):
        """The value to keep (after ``decode``); a subclass may note a problem and adjust it."""
        return value

    def to_query(self) -> dict[str, str]:
        """Only fields that differ from the defaults, so links stay short."""
        base = type(self)()
        return {
            f.name: self.encode(f.name, getattr(self, f.name))
            for f in fields(self)
            if f.name != "problems" and getattr(self, f.name) != getattr(base, f.name)
        }

    @classmethod
    def from_query(cls, query: Mapping[str, object], base=None, max_text_chars: int | None = None):
        """The view of ``query`` (on top of ``base``, default the defaults); never raises."""
        view = replace(base) if base is not None else cls()
        view.problems = []
        for f in fields(cls):
            if f.name == "problems" or f.name not in query:
                continue
            raw = query[f.name]
            if isinstance(raw, (list, tuple)):  # a repeated key: the last value
                raw = raw[-1] if raw else ""
            raw = str(raw)
            limit = cls.LIMITS.get(f.name, 1000)
            if f.name in cls.TEXT_FIELDS and max_text_chars is not None and len(raw) > max_text_chars:
                view.problems.append(
                    f"The link's {f.name} is {len(raw):,} characters long; only the first "
                    f"{max_text_chars:,} are used (NORMVIZ_MAX_TOKENS × 50)."
                )
                raw = raw[:max_text_chars]
            elif f.name not in cls.TEXT_FIELDS and len(raw) > limit:
                view.problems.append(
                    f"Ignored the link's {f.name}: {len(raw):,} characters is too long (at most {limit:,})."
                )
                continue
            try:
                value = cls.decode(f.name, raw)
            except ValueError as exc:
                view.problems.append(f"Ignored the link's {f.name}={_short(raw)!r}: {exc}")
                continue
            setattr(view, f.name, view.accept(f.name, value))
        return view


@dataclass
class ViewState(QueryView):
    """The view of Explore, Overview, Learn and Corpus (shared by them)."""

    text: str = DEFAULT_TEXT
    pair: str = ""
    model: str = DEFAULT_MODEL
    layer: int = 0
    head: int | None = None  # None = all heads (the layer-level map)
    maps: tuple[str, ...] = DEFAULT_MAPS
    hide_special: bool = False
    shared_scale: bool = True
    values: str = "share"
    focus: int | None = None  # token index whose row is shown as bars
    present: bool = False  # stage mode (larger fonts)
    overview_map: str = "attention"
    overview_compare: str = "norm"
    draw: str = "heatmap"  # heatmap | lines
    threshold: float = 0.0  # cells below this share of the panel's largest |value| are hidden (0 … 0.9)
    diff: tuple[str, ...] = ()  # (A, B): a difference panel A − B; () = none
    fx: bool = True  # the ‖f(x_j)‖ strip under norm-based panels
    compare: str = "none"  # none | text | model
    text_b: str = ""  # the second text (compare=text)
    model_b: str = "smollm2"  # the second model (compare=model)
    lesson: str = ""  # Learn: the tab opened first (a map key)
    player: str = ""  # the map animated through the layers ("" = no player)
    steps: tuple = ()  # a talk's named views (normviz.ui.kit.steps.Step), walked with PageDown/PageUp on stage
    theme: str = ""  # dark | light | "" (the browser's): normviz.ui.kit.theme
    problems: list[str] = field(default_factory=list, compare=False, repr=False)

    TEXT_FIELDS = ("text", "pair", "text_b")
    LIMITS = {"steps": 4000}

    @staticmethod
    def encode(name: str, value) -> str:
        if name == "steps":
            from .steps import encode

            return encode(value)
        return encode_value(value)

    @staticmethod
    def decode(name: str, raw: str):
        return _decode(name, raw)

    def accept(self, name: str, value):
        """Repeated map names are dropped (with a note); a talk's steps that could not be read are named."""
        if name == "steps":
            self.problems.extend(f"The link's steps: {p}." for p in value.problems)
            return value.steps
        if name == "maps" and len(set(value)) < len(value):
            twice = sorted({k for k in value if value.count(k) > 1})
            self.problems.append(f"The link names the map(s) {', '.join(twice)} more than once; each is shown once.")
            value = tuple(dict.fromkeys(value))
        return value


def encode_value(value) -> str:
    """A field's query-string form: booleans 1/0, None "all", tuples comma-joined."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if value is None:
        return "all"
    if isinstance(value, (tuple, list)):
        return ",".join(value)
    return str(value)


def _decode(name: str, raw: str):
    if name in ("text", "pair", "model", "overview_map", "overview_compare", "text_b", "model_b", "lesson", "player"):
        if name == "model" and not raw.strip():
            raise ValueError("the model name is empty")
        return raw
    if name in ("hide_special", "shared_scale", "present", "fx"):
        return decode_bool(raw)
    if name in ("layer",):
        return _int(raw, allow_negative=True)
    if name in ("head", "focus"):
        if raw.strip().lower() in ("all", "none", ""):
            return None
        return _int(raw)
    if name == "maps":
        keys = tuple(k.strip() for k in raw.split(",") if k.strip())
        return keys
    if name == "diff":
        keys = tuple(k.strip() for k in raw.split(",") if k.strip())
        if keys and (len(keys) != 2 or keys[0] == keys[1]):
            raise ValueError("name two different maps, e.g. attention,norm")
        return keys
    if name == "theme":
        from .theme import decode as decode_theme

        return decode_theme(raw)
    if name == "steps":
        from .steps import decode_each

        read = decode_each(raw)
        if not read.steps:
            raise ValueError("; ".join(read.problems) or "no step in it")
        return read
    if name == "threshold":
        try:
            value = float(raw.strip()) if len(raw.strip()) <= 12 else float("x")
        except ValueError:
            raise ValueError("not a number") from None
        if not 0.0 <= value <= 0.9:  # also NaN
            raise ValueError("use a number from 0 to 0.9")
        return round(value, 2)
    if name == "draw":
        if raw not in DRAW_MODES:
            raise ValueError(f"use one of {', '.join(DRAW_MODES)}")
        return raw
    if name == "compare":
        if raw not in COMPARE_MODES:
            raise ValueError(f"use one of {', '.join(COMPARE_MODES)}")
        return raw
    if name == "values":
        if raw not in VALUE_MODES:
            raise ValueError(f"use one of {', '.join(VALUE_MODES)}")
        return raw
    raise ValueError("unknown field")  # pragma: no cover


def decode_bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError("use 1 or 0")


def _short(raw: str, limit: int = 60) -> str:
    return raw if len(raw) <= limit else raw[:limit] + "…"


def _int(raw: str, allow_negative: bool = False) -> int:
    try:
        value = int(raw.strip()) if len(raw.strip()) <= 12 else int("x")
    except ValueError:
        raise ValueError("not a whole number") from None
    if value < 0 and not allow_negative:
        raise ValueError("must not be negative")
    return value


# --- deployment settings -----------------------------------------------------------------------------------


def model_allowlist(env: Mapping[str, str] | None = None) -> list[str] | None:
    """``NORMVIZ_ALLOWED_MODELS="minilm,smollm2"`` restricts the model field (public demos). None = anything.
    With ``NORMVIZ_PUBLIC=1`` and no list: the embedded models. Validated in :mod:`normviz.ui.kit.settings`."""
    allowed = settings(env).allowed_models
    return None if allowed is None else list(allowed)


def token_cap(env: Mapping[str, str] | None = None) -> int:
    """``NORMVIZ_MAX_TOKENS`` caps the analysed length (default 128, sensible for a CPU)."""
    return settings(env).max_tokens


def check_model_allowed(name: str, allow: list[str] | None) -> str | None:
    """A user-facing message when ``name`` is not allowed, else None."""
    if allow is None:
        return None
    if name.strip().lower() in {a.lower() for a in allow}:
        return None
    return (
        f"The model {name!r} is not available on this deployment. Choose one of: {', '.join(allow)} "
        "(set by NORMVIZ_ALLOWED_MODELS)."
    )


def load_examples(path) -> list[tuple[str, str]]:
    """(sentence, second sentence or "") per non-comment line of ``assets/examples.txt``."""
    out = []
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        return [(DEFAULT_TEXT, "")]
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        first, _, second = line.partition(" ||| ")
        out.append((first.strip(), second.strip()))
    return out or [(DEFAULT_TEXT, "")]

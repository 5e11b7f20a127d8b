"""The view shown by the app, and its round trip through the URL query string.

Every field has a query-string form so a copied link reproduces the view. Parsing never raises: a bad value
falls back to the default and is reported in ``problems`` so the page can say what it ignored.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Mapping, TypeVar

from .settings import settings
from .url_fields import decode, encode, specs, url

DEFAULT_TEXT = "The cat sat on the mat because it was tired."
DEFAULT_MODEL = "minilm"
# The first view: the 2020/2021 papers' progression (weights → norms → + residual → + norm), all from the one
# recorded pass and the fused norm kernels (~1.3× the forward pass); the FF maps (O(n²·d·d_ff)) are opt-in.
DEFAULT_MAPS = ("attention", "norm", "attn_res", "attn_res_ln")
VALUE_MODES = ("share", "raw")  # row shares (rows sum to 1) | the map's own values
DRAW_MODES = ("heatmap", "lines")  # a matrix of cells | bertviz-style token columns joined by lines
COMPARE_MODES = ("none", "text", "model")  # side by side: nothing | a second text | a second model
DEFAULT_TOKEN_CAP = 128


V = TypeVar("V", bound="QueryView")


class QueryView:
    """The one URL codec of every page's view (a dataclass subclass whose fields are declared with
    :func:`normviz.ui.kit.url_fields.url`; ``problems`` is its last field).

    :meth:`to_query` writes the fields that differ from the defaults; :meth:`from_query` reads them back with
    :func:`normviz.ui.kit.url_fields.decode` and never raises: a bad value keeps the current one (a number out of
    range is clamped) and is reported in ``problems``. A ``text`` field (visitor text) is cut at ``max_text_chars``
    with a note. A subclass may ``accept(name, value)`` (a last adjustment, with notes)."""

    problems: list[str]

    def accept(self, name: str, value):
        """The value to keep (after decoding); a subclass may note a problem and adjust it."""
        return value

    def to_query(self) -> dict[str, str]:
        """Only fields that differ from the defaults, so links stay short."""
        return {
            name: encode(spec, getattr(self, name))
            for name, spec in specs(type(self)).items()
            if getattr(self, name) != spec.default
        }

    @classmethod
    def from_query(
        cls: type[V], query: Mapping[str, object], base: V | None = None, max_text_chars: int | None = None
    ) -> V:
        """The view of ``query`` (on top of ``base``, default the defaults); never raises."""
        view = copy.copy(base) if base is not None else cls()
        view.problems = []
        for name, spec in specs(cls).items():
            if name not in query:
                continue
            raw = query[name]
            if isinstance(raw, (list, tuple)):  # a repeated key: the last value
                raw = raw[-1] if raw else ""
            raw = str(raw)
            if spec.kind == "text" and max_text_chars is not None and len(raw) > max_text_chars:
                view.problems.append(
                    f"The link's {name} is {len(raw):,} characters long; only the first "
                    f"{max_text_chars:,} are used (NORMVIZ_MAX_TOKENS × 50)."
                )
                raw = raw[:max_text_chars]
            read = decode(spec, raw, getattr(view, name))
            if read.clamped:
                view.problems.append(
                    f"The link's {name}={_short(raw)!r} is out of range ({read.why}); using {read.value}."
                )
            elif read.why is not None:
                view.problems.append(f"Ignored the link's {name}={_short(raw)!r}: {read.why}")
                continue
            setattr(view, name, view.accept(name, read.value))
        return view


def _steps_parse(raw: str):
    from .steps import decode_each

    read = decode_each(raw)
    if not read.steps:
        raise ValueError("; ".join(read.problems) or "no step in it")
    return read


def _steps_write(value) -> str:
    from .steps import encode as encode_steps

    return encode_steps(value)


def _two_maps(keys: tuple[str, ...]) -> None:
    if keys and (len(keys) != 2 or keys[0] == keys[1]):
        raise ValueError("name two different maps, e.g. attention,norm")


THEMES = ("", "dark", "light")  # "" = the browser's (normviz.ui.kit.theme)
INDEX_NONE = ("all", "none", "")  # head / focus: all heads, no row


@dataclass
class ViewState(QueryView):
    """The view of Explore, Overview, Learn and Corpus (shared by them)."""

    text: str = url(DEFAULT_TEXT, "text")
    pair: str = url("", "text")
    model: str = url(DEFAULT_MODEL, "str", required=True)
    layer: int = url(0, "int")
    head: int | None = url(None, "int", lo=0, none=INDEX_NONE)  # None = all heads (the layer-level map)
    maps: tuple[str, ...] = url(DEFAULT_MAPS, "keys")
    hide_special: bool = url(False, "flag")
    shared_scale: bool = url(True, "flag")
    values: str = url("share", "choice", choices=VALUE_MODES)
    focus: int | None = url(None, "int", lo=0, none=INDEX_NONE)  # token index whose row is shown as bars
    present: bool = url(False, "flag")  # stage mode (larger fonts)
    overview_map: str = url("attention", "str")
    overview_compare: str = url("norm", "str")
    draw: str = url("heatmap", "choice", choices=DRAW_MODES)  # heatmap | lines
    # cells below this share of the panel's largest |value| are hidden
    threshold: float = url(0.0, "float", lo=0.0, hi=0.9, digits=2)
    diff: tuple[str, ...] = url((), "keys", check=_two_maps)  # (A, B): a difference panel A − B; () = none
    fx: bool = url(True, "flag")  # the ‖f(x_j)‖ strip under norm-based panels
    compare: str = url("none", "choice", choices=COMPARE_MODES)  # none | text | model
    text_b: str = url("", "text")  # the second text (compare=text)
    model_b: str = url("smollm2", "str")  # the second model (compare=model)
    lesson: str = url("", "str")  # Learn: the tab opened first (a map key)
    player: str = url("", "str")  # the map animated through the layers ("" = no player)
    # a talk's named views (normviz.ui.kit.steps.Step), walked with PageDown/PageUp on stage
    steps: tuple = url((), "custom", parse=_steps_parse, write=_steps_write, limit=4000)
    theme: str = url("", "choice", choices=THEMES, fold="lower")  # dark | light | "" (the browser's)
    problems: list[str] = field(default_factory=list, compare=False, repr=False)

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


def _short(raw: str, limit: int = 60) -> str:
    return raw if len(raw) <= limit else raw[:limit] + "…"


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

"""The Translate page's view (its own URL parameters) and its cached encoder–decoder session.

URL parameters: ``model``, ``src``, ``tgt`` (empty: generated), ``layer`` (a number; default the last),
``head`` (``all`` or a number),
``method`` (``norm``/``weight``: whose alignment is drawn), ``setting`` (``AWI``/``AWO``), ``gold`` (Pharaoh).
Parsing never raises: a bad value keeps the default and is reported in ``problems``.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field, fields

import streamlit as st

import normviz
from normviz.errors import NormvizError, TruncationWarning

from .safe import shorten
from .settings import EMBEDDED_SEQ2SEQ, settings
from .state import token_cap

DEFAULT_MODEL = "toy-mt"
DEFAULT_SRC = "the big dog often sees a small red car"
CROSS_KEYS = ["cross_attention", "cross_norm", "cross_norm_layer"]
METHODS = ("norm", "weight")
SETTINGS = ("AWI", "AWO")
MAX_GOLD_CHARS = 4000


@dataclass
class TranslateView:
    model: str = DEFAULT_MODEL
    src: str = DEFAULT_SRC
    tgt: str = ""
    layer: int | None = None  # None = the last layer
    head: int | None = None  # None = the layer view
    method: str = "norm"
    setting: str = "AWO"
    gold: str = ""
    problems: list[str] = field(default_factory=list, compare=False, repr=False)

    def to_query(self) -> dict[str, str]:
        """Fields that differ from the defaults."""
        base, out = TranslateView(), {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "problems" or value == getattr(base, f.name):
                continue
            out[f.name] = ("all" if f.name == "head" else "last") if value is None else str(value)
        return out

    @classmethod
    def from_query(cls, query, max_text_chars: int | None = None) -> "TranslateView":
        view = cls()
        limits = {"src": max_text_chars, "tgt": max_text_chars, "gold": MAX_GOLD_CHARS, "model": 256}
        for f in fields(cls):
            if f.name == "problems" or f.name not in query:
                continue
            raw = query[f.name]
            raw = str(raw[-1] if isinstance(raw, (list, tuple)) and raw else raw)
            limit = limits.get(f.name) or 1000
            if len(raw) > limit:
                view.problems.append(f"Ignored the link's {f.name}: {len(raw):,} characters is too long "
                                     f"(at most {limit:,}).")
                continue
            try:
                setattr(view, f.name, _decode(f.name, raw))
            except ValueError as exc:
                view.problems.append(f"Ignored the link's {f.name}={shorten(raw, 60)!r}: {exc}")
        return view


def _decode(name: str, raw: str):
    if name in ("src", "tgt", "gold"):
        return raw
    if name == "model":
        if not raw.strip():
            raise ValueError("the model name is empty")
        if _self_attention_only(raw.strip()):  # e.g. the other pages' model, carried in a shared link
            raise ValueError("this embedded model has no decoder to translate with (it is for the other pages)")
        return raw.strip()
    if name in ("layer", "head"):
        if raw.strip().lower() in (("all", "") if name == "head" else ("last", "")):
            return None
        if not raw.strip().isdigit() or len(raw.strip()) > 6:
            raise ValueError("not a whole number ≥ 0")
        return int(raw)
    if name == "method":
        if raw not in METHODS:
            raise ValueError(f"use one of {', '.join(METHODS)}")
        return raw
    if name == "setting":
        if raw.upper() not in SETTINGS:
            raise ValueError(f"use one of {', '.join(SETTINGS)}")
        return raw.upper()
    raise ValueError("unknown field")  # pragma: no cover


def not_encoder_decoder(lm) -> str | None:
    """A message when ``lm`` has no cross-attention to analyse, else None."""
    if getattr(lm.config, "is_encoder_decoder", False):
        return None
    return (f"{lm.name} is a {lm.model_type} model without an encoder–decoder cross-attention, so there is "
            f"nothing to translate or align. Use toy-mt (embedded) or a Marian, BART or T5 model here; the "
            "Explore page analyses this model.")


def translation_session(lm, src: str, tgt: str):
    """``(session, notes)``: the shared session of this pair (target generated when ``tgt`` is empty), or
    ``(None, [message])``. Texts are cut at the page's character limit and the token cap first."""
    from .st_parts import session_cache, session_options

    notes = []
    limit = settings().max_text_chars
    for what, text in (("source", src), ("target", tgt)):
        if len(text) > limit:
            notes.append(f"The {what} is {len(text):,} characters long; only the first {limit:,} are analysed.")
    src, tgt = src[:limit], tgt[:limit]
    cap = token_cap()
    options = session_options(lm)
    key = lm.cache_key + ("translate", src, tgt, cap, tuple(sorted(options.items())))

    def make():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TruncationWarning)
            session = normviz.Session(lm, src, target=tgt or None, max_tokens=cap, options=options)
        return session, [f"{w.message} Set NORMVIZ_MAX_TOKENS to change the limit." for w in caught
                         if issubclass(w.category, TruncationWarning)]

    try:
        session, more = session_cache().get_or_compute(key, make)
    except NormvizError as exc:
        return None, notes + [" ".join(str(exc).split())[:600]]
    return session, notes + more


@st.cache_data(show_spinner=False, max_entries=4)
def toy_examples(path: str, n: int = 12) -> list[tuple[str, str, str]]:
    """(source, target, gold) of the first ``n`` lines of the toy-mt test set under ``path`` (empty if absent)."""
    from pathlib import Path

    base = Path(path)
    try:
        parts = [(base / f"test.{ext}").read_text(encoding="utf-8").splitlines()[:n] for ext in ("src", "tgt", "align")]
    except OSError:
        return []
    return list(zip(*parts))


def maps_npz(maps: dict, src_tokens: list[str], tgt_tokens: list[str]) -> bytes:
    """The shown matrices (rows target, columns source) with their tokens, as .npz bytes."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, src_tokens=np.array(src_tokens, dtype=str), tgt_tokens=np.array(tgt_tokens, dtype=str),
             **{f"cross_{k}": np.asarray(v) for k, v in maps.items()})
    return buf.getvalue()


def cross_maps(session):
    """``(analysis, message)``: the cross maps of the session (computed once; a progress bar meanwhile), or
    ``(None, message)`` after a failure. Refused keys are listed in the message."""
    bar = st.empty()
    try:
        prog = bar.progress(0.0, text="Analysing the cross-attention…")
        a = session.get(CROSS_KEYS, strict=False,
                        progress=lambda f, m: prog.progress(min(1.0, max(0.0, f)), text=f"Analysing: {m}"))
    except NormvizError as exc:
        return None, " ".join(str(exc).split())[:600]
    except Exception as exc:  # never a traceback in the page
        return None, f"The analysis failed: {type(exc).__name__}: {shorten(str(exc), 300)}"
    finally:
        bar.empty()
    refused = [f"{k}: {a.refused[k]}" for k in CROSS_KEYS if k in a.refused]
    if refused:
        return None, "; ".join(refused)
    return a, None


def _self_attention_only(name: str) -> bool:
    """An embedded model that is not an encoder–decoder (minilm, smollm2)."""
    key = name.lower()
    return key in normviz.EMBEDDED and key not in EMBEDDED_SEQ2SEQ

"""The Translate page's view (its own URL parameters) and its helpers (examples, the NPZ export).

URL parameters: ``model``, ``src``, ``tgt`` (empty: generated), ``layer`` (a number; default the last),
``head`` (``all`` or a number),
``method`` (``norm``/``weight``: whose alignment is drawn), ``setting`` (``AWI``/``AWO``), ``gold`` (Pharaoh),
``present`` (stage mode). Parsed by the pages' one codec, :class:`normviz.ui.kit.state.QueryView`: never raises, a bad
value keeps the default and is reported in ``problems``. The session and its maps come from
:mod:`normviz.ui.kit.fetch`, as on every page.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

import normviz

from ..kit.settings import EMBEDDED_SEQ2SEQ
from ..kit.state import QueryView, decode_bool, encode_value

DEFAULT_MODEL = "toy-mt"
DEFAULT_SRC = "the big dog often sees a small red car"
CROSS_KEYS = ["cross_attention", "cross_norm", "cross_norm_layer"]
METHODS = ("norm", "weight")
SETTINGS = ("AWI", "AWO")
MAX_GOLD_CHARS = 4000


@dataclass
class TranslateView(QueryView):
    """Translate's view; its URL round trip is :class:`normviz.ui.kit.state.QueryView`'s, as every page's."""

    model: str = DEFAULT_MODEL
    src: str = DEFAULT_SRC
    tgt: str = ""
    layer: int | None = None  # None = the last layer
    head: int | None = None  # None = the layer view
    method: str = "norm"
    setting: str = "AWO"
    gold: str = ""
    present: bool = False  # stage mode (larger fonts, collapsed controls)
    problems: list[str] = field(default_factory=list, compare=False, repr=False)

    TEXT_FIELDS = ("src", "tgt")
    LIMITS = {"gold": MAX_GOLD_CHARS, "model": 256}

    @staticmethod
    def encode(name: str, value) -> str:
        if value is None:
            return "all" if name == "head" else "last"
        return encode_value(value)

    @staticmethod
    def decode(name: str, raw: str):
        return _decode(name, raw)


def _decode(name: str, raw: str):
    if name in ("src", "tgt", "gold"):
        return raw
    if name == "present":
        return decode_bool(raw)
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


def _self_attention_only(name: str) -> bool:
    """An embedded model that is not an encoder–decoder (minilm, smollm2)."""
    key = name.lower()
    return key in normviz.EMBEDDED and key not in EMBEDDED_SEQ2SEQ

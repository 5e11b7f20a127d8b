"""The Translate page's view (its own URL parameters) and its helpers (examples, the NPZ export).

URL parameters: ``model``, ``src``, ``tgt`` (empty: generated), ``layer`` (a number; default the last),
``head`` (``all`` or a number),
``method`` (``norm``/``weight``: whose alignment is drawn), ``setting`` (``AWI``/``AWO``), ``gold`` (Pharaoh),
``present`` (stage mode), ``theme`` (dark/light). Parsed by the pages' one codec,
:class:`normviz.ui.kit.state.QueryView`: never raises, a bad
value keeps the default and is reported in ``problems``. The session and its maps come from
:mod:`normviz.ui.kit.fetch`, as on every page.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

import normviz
from normviz.core.tokens import tokenize

from ..kit.settings import EMBEDDED_SEQ2SEQ
from ..kit.state import THEMES, QueryView
from ..kit.url_fields import url

DEFAULT_MODEL = "toy-mt"
DEFAULT_SRC = "the big dog often sees a small red car"
CROSS_KEYS = ["cross_attention", "cross_norm", "cross_norm_layer"]
METHODS = ("norm", "weight")
SETTINGS = ("AWI", "AWO")
MAX_GOLD_CHARS = 4000


def _translates(name: str) -> None:
    if _self_attention_only(name.strip()):  # e.g. the other pages' model, carried in a shared link
        raise ValueError("this embedded model has no decoder to translate with (it is for the other pages)")


@dataclass
class TranslateView(QueryView):
    """Translate's view; its URL round trip is :class:`normviz.ui.kit.state.QueryView`'s, as every page's."""

    model: str = url(DEFAULT_MODEL, "str", required=True, strip=True, check=_translates, limit=256)
    src: str = url(DEFAULT_SRC, "text")
    tgt: str = url("", "text")
    layer: int | None = url(None, "int", lo=0, none=("last", ""))  # None = the last layer
    head: int | None = url(None, "int", lo=0, none=("all", ""))  # None = the layer view
    method: str = url("norm", "choice", choices=METHODS)
    setting: str = url("AWO", "choice", choices=SETTINGS, fold="upper")
    gold: str = url("", "str", limit=MAX_GOLD_CHARS)
    present: bool = url(False, "flag")  # stage mode (larger fonts, collapsed controls)
    theme: str = url("", "choice", choices=THEMES, fold="lower")  # dark | light | "" (the browser's)
    problems: list[str] = field(default_factory=list, compare=False, repr=False)


def unknown_words(tokenizer, text: str) -> list[str]:
    """The words of ``text`` (split on spaces) that ``tokenizer`` can only read as its unknown token, each once,
    in order; [] for a tokenizer without one (byte-level: every word has pieces)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None:
        return []
    out = []
    for word in dict.fromkeys(text.split()):
        ids = tokenize(tokenizer, word, add_special_tokens=False)["input_ids"]
        if unk in ids:
            out.append(word)
    return out


def unknown_words_note(
    model: str, vocab_size: int, unknown: list[str], n_words: int, examples: list[tuple[str, str, str]]
) -> str:
    """What to tell a visitor whose source has words the model does not know (plain text)."""
    shown = ", ".join(f"“{w}”" for w in unknown[:12]) + (f" and {len(unknown) - 12} more" if len(unknown) > 12 else "")
    text = (
        f"{model} does not know {len(unknown)} of the {n_words} words of the source: {shown}. "
        f"It reads each as <unk>, so its translation of them means nothing."
    )
    if model.strip().lower() == "toy-mt":
        text += (
            f" toy-mt is a tiny model trained on a toy language pair with a vocabulary of {vocab_size} "
            "tokens (lower-case words such as the, big, dog, sees, car): real sentences are mostly unknown "
            "to it."
        )
    if examples:
        text += (
            " Try one of its example sentences (the Examples box), e.g. "
            + "; ".join(f"“{src}”" for src, _, _ in examples[:3])
            + "."
        )
    return text


def not_encoder_decoder(lm) -> str | None:
    """A message when ``lm`` has no cross-attention to analyse, else None."""
    if getattr(lm.config, "is_encoder_decoder", False):
        return None
    return (
        f"{lm.name} is a {lm.model_type} model without an encoder–decoder cross-attention, so there is "
        f"nothing to translate or align. Use toy-mt (embedded) or a Marian, BART or T5 model here; the "
        "Explore page analyses this model."
    )


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
    np.savez(
        buf,
        src_tokens=np.array(src_tokens, dtype=str),
        tgt_tokens=np.array(tgt_tokens, dtype=str),
        **{f"cross_{k}": np.asarray(v) for k, v in maps.items()},
    )
    return buf.getvalue()


def _self_attention_only(name: str) -> bool:
    """An embedded model that is not an encoder–decoder (minilm, smollm2)."""
    key = name.lower()
    return key in normviz.EMBEDDED and key not in EMBEDDED_SEQ2SEQ

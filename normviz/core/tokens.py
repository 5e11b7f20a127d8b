"""Text → token ids, with clear errors for empty input and a warning when the window truncates.

Sentence pairs. Encoders: the tokenizer's own pair encoding (``[CLS] a [SEP] b [SEP]`` for BERT) with its
segment ids (``token_type_ids``: 0 for the first segment, 1 for the second), which the recording pass gives
the model, so a pair's maps are those of the model's real pair forward pass. Decoders have no pair format:
``encode(…, decoder=True)`` joins the two texts with a separator token — the tokenizer's sep token if it has
one, else its eos token — placed between the first text's ids (with the tokenizer's own special tokens) and
the second's (without); a tokenizer with neither joins the texts with a newline. How the pair was joined is
stated in ``Encoded.note`` (and in ``Analysis.notes["pair"]``).

Threads. A fast tokenizer's truncation setting is the shared Rust tokenizer's own state: a call with
``truncation=True`` sets it, the next call without truncation clears it, and the encoding reads it in between. Two
threads encoding at once could read each other's (a text came back cut to another visitor's limit, counted as
nothing dropped). Every call this module makes holds that tokenizer's lock (:func:`tokenizer_lock`) from the
setting to the result, so :func:`encode` gives in any thread what it gives alone; :func:`tokenize` is the same call
for other code that uses the tokenizer beside it (the app's pages).
"""

from __future__ import annotations

import threading
import warnings
import weakref
from dataclasses import dataclass

import torch

from .errors import EmptyInputError, TruncationWarning

MAX_CHARS_PER_TOKEN = 50  # text beyond max_length × 50 characters is cut before tokenising (bounded time and memory)


_LOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # tokenizer -> its RLock
_LOCKS_GUARD = threading.Lock()
_UNWEAKABLE = threading.RLock()  # for a tokenizer that takes no weak reference (one lock for all of them)


def tokenizer_lock(tokenizer) -> threading.RLock:
    """The lock held around every call of ``tokenizer`` in this module (one per tokenizer object; reentrant)."""
    with _LOCKS_GUARD:
        try:
            lock = _LOCKS.get(tokenizer)
            if lock is None:
                lock = _LOCKS[tokenizer] = threading.RLock()
        except TypeError:  # not weak-referenceable
            return _UNWEAKABLE
    return lock


def tokenize(tokenizer, *args, **kwargs):
    """``tokenizer(*args, **kwargs)`` under :func:`tokenizer_lock` (its truncation setting is shared state)."""
    with tokenizer_lock(tokenizer):
        return tokenizer(*args, **kwargs)


@dataclass
class Encoded:
    ids: list[int]
    tokens: list[str]
    labels: list[str]  # readable per-token text for display
    special: list[bool]
    dropped: int  # tokens removed by truncation
    token_type_ids: list[int] | None = None  # segment ids from the tokenizer (pairs of encoders), else None
    note: str | None = None  # how a sentence pair was encoded (see the module docstring)


def _label(tokenizer, tok: str, tid: int) -> str:
    try:
        text = tokenizer.decode([tid], clean_up_tokenization_spaces=False)
    except Exception:  # pragma: no cover - decoders that can't take one id
        text = tok
    if not text.strip():
        text = tok.replace("Ġ", "␣").replace("▁", "␣") if tok.strip() else repr(text)
    return text


def _segment_ids(tokenizer, enc) -> list[int] | None:
    """The tokenizer's token_type_ids when it makes them for its model (BERT-style), else None."""
    if "token_type_ids" not in (getattr(tokenizer, "model_input_names", None) or ()):
        return None
    types = enc.get("token_type_ids") if hasattr(enc, "get") else None
    return list(types) if types is not None else None


def decoder_pair_ids(tokenizer, text: str, text_pair: str) -> tuple[list[int], str]:
    """A pair for a decoder: (ids, note). ids(text, with the tokenizer's special tokens) + [sep] +
    ids(text_pair, without), sep = the tokenizer's sep token, else its eos token; with neither, the texts
    joined by a newline and tokenised as one."""
    for role in ("sep", "eos"):
        tid = getattr(tokenizer, f"{role}_token_id", None)
        if tid is not None:
            tok = getattr(tokenizer, f"{role}_token", None)
            a = tokenize(tokenizer, text, add_special_tokens=True)["input_ids"]
            b = tokenize(tokenizer, text_pair, add_special_tokens=False)["input_ids"]
            return (
                list(a) + [int(tid)] + list(b),
                f"pair joined for this decoder as: text {tok} text_pair (the tokenizer's {role} token {tok!r}, "
                f"id {tid}, between the two texts; a decoder has no segment ids)",
            )
    ids = tokenize(tokenizer, f"{text}\n{text_pair}", add_special_tokens=True)["input_ids"]
    return list(ids), (
        "pair joined for this decoder as: text + newline + text_pair (the tokenizer has no sep or "
        "eos token; a decoder has no segment ids)"
    )


def encode(
    tokenizer,
    text: str,
    text_pair: str | None = None,
    max_length: int | None = None,
    warn: bool = True,
    decoder: bool = False,
) -> Encoded:
    """Token ids of ``text`` (or of the pair ``text``, ``text_pair``), cut to ``max_length``.

    ``decoder``: the model is a decoder, so a pair is joined with a separator (:func:`decoder_pair_ids`)
    instead of the tokenizer's pair encoding; encoders keep the tokenizer's segment ids."""
    if text is None or not str(text).strip():
        raise EmptyInputError("The text is empty. Type a sentence (or two) to analyse.")
    if text_pair is not None and not str(text_pair).strip():
        text_pair = None
    if max_length is not None:  # bounded time and memory: never tokenise far more text than can be kept
        cap = max_length * MAX_CHARS_PER_TOKEN
        if len(text) > cap or len(text_pair or "") > cap:
            if warn:
                warnings.warn(
                    f"The text is {len(text) + len(text_pair or ''):,} characters long, more than "
                    f"{MAX_CHARS_PER_TOKEN} per token of the limit of {max_length}; it was cut to {cap:,} "
                    "characters before tokenising.",
                    TruncationWarning,
                    stacklevel=3,
                )
            text, text_pair = text[:cap], (text_pair[:cap] if text_pair else text_pair)
    note = None
    types = None
    if text_pair is not None and decoder:
        full, note = decoder_pair_ids(tokenizer, text, text_pair)
    else:
        enc = tokenize(tokenizer, text, text_pair, add_special_tokens=True, truncation=False)
        full = enc["input_ids"]
        types = _segment_ids(tokenizer, enc)
        if text_pair is not None:
            note = "pair encoded by the tokenizer" + (
                " with segment ids (token_type_ids 0 | 1) given to the model"
                if types is not None and any(types)
                else " (this tokenizer makes no segment ids)"
            )
    dropped = 0
    if max_length is not None and len(full) > max_length:
        if text_pair is not None and decoder:
            ids = full[:max_length]
        else:
            enc = tokenize(tokenizer, text, text_pair, add_special_tokens=True, truncation=True, max_length=max_length)
            ids = enc["input_ids"]
            types = _segment_ids(tokenizer, enc)
        dropped = len(full) - len(ids)
        if warn:
            warnings.warn(
                f"The text is {len(full)} tokens long, more than the limit of {max_length}; "
                f"{dropped} tokens were dropped from the end.",
                TruncationWarning,
                stacklevel=3,
            )
    else:
        ids = full
    if not ids:
        raise EmptyInputError("The text gave no tokens. Type a sentence to analyse.")
    enc = encoded_ids(tokenizer, ids, dropped)
    enc.token_type_ids, enc.note = (list(types) if types is not None else None), note
    return enc


def encoded_ids(tokenizer, ids: list[int], dropped: int = 0) -> Encoded:
    """An :class:`Encoded` of given token ids: their tokens, readable labels and special-token flags."""
    tokens = tokenizer.convert_ids_to_tokens(list(ids))
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    special = [i in special_ids for i in ids]
    labels = [_label(tokenizer, t, i) for t, i in zip(tokens, ids)]
    return Encoded(ids=list(ids), tokens=list(tokens), labels=labels, special=special, dropped=dropped)


def pad_batch(encoded: list[Encoded], pad_id: int = 0, with_token_types: bool = False):
    """Right-pad a batch; the mask marks real tokens. ``with_token_types``: also the padded segment ids
    (padding 0), or None when no sequence of the batch has any: (ids, mask, token_type_ids)."""
    n = max(len(e.ids) for e in encoded)
    ids = torch.full((len(encoded), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), n), dtype=torch.long)
    for b, e in enumerate(encoded):
        ids[b, : len(e.ids)] = torch.tensor(e.ids)
        mask[b, : len(e.ids)] = 1
    if not with_token_types:
        return ids, mask
    types = None
    if any(e.token_type_ids is not None for e in encoded):
        types = torch.zeros((len(encoded), n), dtype=torch.long)
        for b, e in enumerate(encoded):
            if e.token_type_ids is not None:
                types[b, : len(e.token_type_ids)] = torch.tensor(e.token_type_ids)
    return ids, mask, types

"""Text → token ids, with clear errors for empty input and a warning when the window truncates."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from .errors import EmptyInputError, TruncationWarning

MAX_CHARS_PER_TOKEN = 50  # text beyond max_length × 50 characters is cut before tokenising (bounded time and memory)


@dataclass
class Encoded:
    ids: list[int]
    tokens: list[str]
    labels: list[str]  # readable per-token text for display
    special: list[bool]
    dropped: int  # tokens removed by truncation


def _label(tokenizer, tok: str, tid: int) -> str:
    try:
        text = tokenizer.decode([tid], clean_up_tokenization_spaces=False)
    except Exception:  # pragma: no cover - decoders that can't take one id
        text = tok
    if not text.strip():
        text = tok.replace("Ġ", "␣").replace("▁", "␣") if tok.strip() else repr(text)
    return text


def encode(tokenizer, text: str, text_pair: str | None = None, max_length: int | None = None,
           warn: bool = True) -> Encoded:
    if text is None or not str(text).strip():
        raise EmptyInputError("The text is empty. Type a sentence (or two) to analyse.")
    if text_pair is not None and not str(text_pair).strip():
        text_pair = None
    if max_length is not None:  # bounded time and memory: never tokenise far more text than can be kept
        cap = max_length * MAX_CHARS_PER_TOKEN
        if len(text) > cap or len(text_pair or "") > cap:
            if warn:
                warnings.warn(f"The text is {len(text) + len(text_pair or ''):,} characters long, more than "
                              f"{MAX_CHARS_PER_TOKEN} per token of the limit of {max_length}; it was cut to {cap:,} "
                              "characters before tokenising.", TruncationWarning, stacklevel=3)
            text, text_pair = text[:cap], (text_pair[:cap] if text_pair else text_pair)
    full = tokenizer(text, text_pair, add_special_tokens=True, truncation=False)["input_ids"]
    dropped = 0
    if max_length is not None and len(full) > max_length:
        ids = tokenizer(text, text_pair, add_special_tokens=True, truncation=True, max_length=max_length)["input_ids"]
        dropped = len(full) - len(ids)
        if warn:
            warnings.warn(
                f"The text is {len(full)} tokens long, more than the limit of {max_length}; "
                f"{dropped} tokens were dropped from the end.", TruncationWarning, stacklevel=3,
            )
    else:
        ids = full
    if not ids:
        raise EmptyInputError("The text gave no tokens. Type a sentence to analyse.")
    tokens = tokenizer.convert_ids_to_tokens(ids)
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    special = [i in special_ids for i in ids]
    labels = [_label(tokenizer, t, i) for t, i in zip(tokens, ids)]
    return Encoded(ids=list(ids), tokens=list(tokens), labels=labels, special=special, dropped=dropped)


def pad_batch(encoded: list[Encoded], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad a batch; the mask marks real tokens."""
    n = max(len(e.ids) for e in encoded)
    ids = torch.full((len(encoded), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), n), dtype=torch.long)
    for b, e in enumerate(encoded):
        ids[b, : len(e.ids)] = torch.tensor(e.ids)
        mask[b, : len(e.ids)] = 1
    return ids, mask

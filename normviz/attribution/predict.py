"""Predictions from the one recorded pass: the LM head applied to the final hidden state at one position.

``predict(session, top, position)`` → candidates best first (.token, .id, .prob, .logit); tokens given as
a string of one token or an id (:func:`token_id`); positions negative from the end (:func:`position_index`).
"""

from __future__ import annotations

import math
import numbers
import operator
from dataclasses import dataclass

import torch

from ..core.errors import InputError, NormvizError
from .readout import Readout, readout_of, stack_view


@dataclass(frozen=True)
class Candidate:
    """One predicted token: its text (the tokenizer's decoding of the one id), id, probability, logit."""

    token: str
    id: int
    prob: float
    logit: float


def whole_number(value, what: str) -> int:
    """``value`` as an int when it is one exactly (an int, a numpy integer, a float or string of a whole
    number); InputError otherwise: 1.5, nan, True, "two" are refused, never rounded or truncated."""
    if isinstance(value, bool):
        raise InputError(f"{what} must be a whole number, got {value!r}.")
    try:
        return operator.index(value)
    except TypeError:  # not an integer type (a float, a string, a float tensor …)
        pass
    number = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if isinstance(number, numbers.Real) and math.isfinite(number) and float(number).is_integer():
        return int(number)
    raise InputError(f"{what} must be a whole number, got {value!r}.")


def position_index(position: int, n: int) -> int:
    """``position`` (negative: from the end) as an index into n tokens; NormvizError when out of range or
    not a whole number."""
    p = whole_number(position, "position")
    if not -n <= p < n:
        raise NormvizError(f"position {p} is outside the text's {n} tokens (use 0…{n - 1}, or −1 for the last).")
    return p % n


def token_text(tokenizer, token_id: int) -> str:
    """The token's readable text: the tokenizer's decoding; where that is a piece of a character split into
    bytes (an emoji over two or three tokens decodes to '�'), its bytes, the incomplete ones as escapes
    (' \\xf0\\x9f')."""
    if tokenizer is None:
        return str(int(token_id))
    text = tokenizer.decode([int(token_id)])
    if "\ufffd" in text:
        raw = token_bytes(tokenizer, int(token_id))
        if raw is not None:
            return raw.decode("utf-8", errors="backslashreplace")
    return text


def token_bytes(tokenizer, token_id: int) -> bytes | None:
    """The bytes a token stands for, where the vocabulary spells them: byte-level BPE (GPT-2, Llama 3,
    SmolLM2: one printable character per byte) or SentencePiece's byte fallback ('<0xF0>'); else None."""
    try:
        piece = tokenizer.convert_ids_to_tokens(int(token_id))
    except Exception:  # noqa: BLE001  a tokenizer without that call or id: no bytes known
        return None
    if not isinstance(piece, str):
        return None
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return bytes([int(piece[3:5], 16)])
        except ValueError:
            return None
    table = _byte_decoder()
    if all(ch in table for ch in piece):
        return bytes(table[ch] for ch in piece)
    return None


def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable character → byte table (its bytes_to_unicode, inverted)."""
    global _BYTE_DECODER
    if _BYTE_DECODER is None:
        bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
        cs, n = bs[:], 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + n)
                n += 1
        _BYTE_DECODER = {chr(c): b for b, c in zip(bs, cs)}
    return _BYTE_DECODER


_BYTE_DECODER: dict[str, int] | None = None


def token_id(tokenizer, token, vocab_size: int, what: str = "token") -> int:
    """The id of ``token``: an int id, or a string that is ONE token (as the text encodes it, e.g. " Paris"
    with its space, or the vocabulary's own spelling, e.g. "ĠParis")."""
    if not isinstance(token, (str, bool)) and hasattr(token, "__index__"):  # int, numpy integer
        t = operator.index(token)
        if not 0 <= t < vocab_size:
            raise NormvizError(f"{what} id {t} is outside the vocabulary (0…{vocab_size - 1}).")
        return t
    if not isinstance(token, str) or token == "":
        raise NormvizError(f"{what} must be one token (a non-empty string) or a token id, got {token!r}.")
    if tokenizer is None:
        if token.strip().isdigit():
            return token_id(None, int(token.strip()), vocab_size, what)
        raise NormvizError(f"This model has no tokenizer: give the {what} as a token id.")
    ids = tokenizer.encode(token, add_special_tokens=False)
    if len(ids) == 1 and 0 <= ids[0] < vocab_size:
        return int(ids[0])
    vocab = tokenizer.get_vocab()
    if token in vocab and 0 <= vocab[token] < vocab_size:
        return int(vocab[token])
    pieces = [token_text(tokenizer, i) for i in ids]
    raise NormvizError(
        f"{what} {token!r} is {len(ids)} tokens here ({', '.join(repr(p) for p in pieces)}), not one: "
        "give a single token (e.g. its first piece) or its id."
    )


def final_state(views, i: int) -> torch.Tensor:
    """The stack's final hidden state at i (recorded in the one pass)."""
    final = views[-1].rec.final
    if final is None:
        raise NormvizError("This recording kept no final hidden state (record with normviz.record.recorder.record).")
    return final[i]


def logits_at(readout: Readout, views, i: int) -> torch.Tensor:
    """The model's own logits [V] at position i: its LM head on its final hidden state there (only there)."""
    return readout.logits(final_state(views, i)[None])[0]


@torch.no_grad()
def predict(session, top: int = 10, position: int = -1) -> list[Candidate]:
    """The ``top`` most probable next tokens at ``position`` (encoders: the token at a [MASK] there;
    encoder–decoders: after decoder row ``position``); the whole vocabulary when ``top`` exceeds it."""
    k = whole_number(top, "top")
    if k < 1:
        raise InputError(f"top must be 1 or more (how many candidates to list), got {k}.")
    lm, stack = stack_view(session)
    readout = readout_of(lm)  # refused before the recording pass when there is no head
    views = session.layers(stack)
    i = position_index(position, len(views[0].rec.x))
    logits = logits_at(readout, views, i).to(torch.float64)
    k = min(k, logits.shape[0])
    probs = torch.softmax(logits, -1)
    best = torch.topk(logits, k)
    tok = session.lm.tokenizer
    return [
        Candidate(token=token_text(tok, t), id=int(t), prob=float(probs[t]), logit=float(logits[t]))
        for t in best.indices.tolist()
    ]

"""An encoder–decoder's two token axes: the source (the encoder's input; columns of the cross maps) and the
target (the decoder's input; rows), given or generated greedily.

    source ─ tokenise ─► src ids s (the encoder's input)
    target ─ tokenise ─► labels y (given: teacher-forced on the reference; None: generated greedily, capped)
    decoder input ids t = shift_right(y): the decoder start token, then y without its last token (rows)

Row r of every decoder and cross map is fed t_r and predicts y_r (= t_{r+1}; the last row predicts the eos).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from ...core.errors import NormvizError, TruncationWarning, UnsupportedModelError
from ...core.tokens import MAX_CHARS_PER_TOKEN, Encoded, encode, encoded_ids, tokenize
from ..recorder import model_lock
from .params import decoder_view, require_seq2seq

MAX_NEW_TOKENS = 256  # the bound of a generated target


def default_max_new_tokens(n_source: int) -> int:
    """2 × source tokens + 10, at most MAX_NEW_TOKENS."""
    return min(MAX_NEW_TOKENS, 2 * n_source + 10)


# ---------------------------------------------------------------- the target's ids
def target_labels(lm, target: str, limit: int) -> tuple[list[int], int]:
    """The tokenizer's target ids of ``target`` (``text_target``: Marian's target vocabulary), cut to
    ``limit`` with a TruncationWarning; (labels, dropped)."""
    tok = lm.tokenizer
    cap = limit * MAX_CHARS_PER_TOKEN  # bounded time and memory, as for the source (normviz.core.tokens.encode)
    if len(target) > cap:
        warnings.warn(
            f"The target is {len(target):,} characters long, more than {MAX_CHARS_PER_TOKEN} per token of "
            f"the limit of {limit}; it was cut to {cap:,} characters before tokenising.",
            TruncationWarning,
            stacklevel=4,
        )
        target = target[:cap]
    labels = list(tokenize(tok, text_target=target, add_special_tokens=True)["input_ids"])
    if not labels:
        raise NormvizError("The target gave no tokens. Type a translation, or leave it empty to generate one.")
    dropped = max(0, len(labels) - limit)
    if dropped:
        labels = labels[:limit]
        warnings.warn(
            f"The target is {len(labels) + dropped} tokens long, more than the limit of {limit}; "
            f"{dropped} tokens were dropped from the end.",
            TruncationWarning,
            stacklevel=4,
        )
    return labels, dropped


def shift_right(lm, labels: list[int]) -> list[int]:
    """Decoder input ids for ``labels`` as the model builds them in training (its own
    ``prepare_decoder_input_ids_from_labels``; else the decoder start token, then labels[:-1])."""
    prepare = getattr(lm.model, "prepare_decoder_input_ids_from_labels", None)
    if prepare is not None:
        return prepare(labels=torch.tensor([labels], device=lm.device))[0].tolist()
    start = getattr(lm.config, "decoder_start_token_id", None)
    if start is None:
        raise UnsupportedModelError(f"{lm.name!r} names no decoder_start_token_id in its config.")
    return [int(start)] + list(labels[:-1])


@torch.no_grad()
def generate(lm, src_ids: list[int], max_new_tokens: int) -> tuple[list[int], list[int], bool]:
    """Greedy decoding (no sampling, one beam) of at most ``max_new_tokens``: (decoder input ids, labels,
    ended), the generated sequence without its last token and without its start token."""
    can = getattr(lm.model, "can_generate", None)
    if can is None or not can():
        raise UnsupportedModelError(
            f"{lm.name!r} has no language-model head, so it cannot generate a target; "
            "pass the target text (target=…, --target)."
        )
    src = torch.tensor([list(src_ids)], device=lm.device)
    # transformers sizes the KV cache by config.num_hidden_layers, the encoder's depth: a T5 whose decoder is
    # deeper (num_decoder_layers) must generate without one
    use_cache = len(decoder_view(lm).layers) == getattr(lm.config, "num_hidden_layers", None)
    with model_lock(lm.model), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # generation-config notices (beams overridden …)
        seq = lm.model.generate(
            input_ids=src,
            attention_mask=torch.ones_like(src),
            max_new_tokens=max_new_tokens,
            num_beams=1,
            do_sample=False,
            use_cache=use_cache,
            forced_eos_token_id=None,
        )[0].tolist()
    eos = lm.model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    return seq[:-1], seq[1:], bool(seq[1:]) and seq[-1] in eos


@dataclass
class Seq2SeqInputs:
    """What an encoder–decoder session analyses: the source, the decoder's input ids (rows) and the labels
    each row predicts, the target's text and how the target was obtained (``note``)."""

    source: Encoded
    target: Encoded  # decoder input tokens: the start token, then the labels without the last
    labels: Encoded  # what each decoder row predicts under teacher forcing
    text: str  # the target given, or the one generated (decoded)
    note: str


def prepare(
    lm,
    text: str,
    text_pair: str | None = None,
    target: str | None = None,
    max_tokens: int | None = None,
    max_new_tokens: int | None = None,
    options: dict | None = None,
) -> Seq2SeqInputs:
    """Tokenise the source and the target (``target`` None or blank: generated greedily, capped by
    ``max_new_tokens`` or option ``max_new_tokens``, default 2 × source tokens + 10, at most MAX_NEW_TOKENS)."""
    require_seq2seq(lm)
    if text_pair is not None and str(text_pair).strip():
        raise NormvizError(
            "An encoder–decoder model takes a source text and a target (target=…, --target), "
            "not a sentence pair (text_pair, --text-pair)."
        )
    options = options or {}
    limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
    source = encode(lm.tokenizer, text, None, max_length=limit)
    if target is not None and str(target).strip():
        labels, dropped = target_labels(lm, target, limit)
        tgt_ids = shift_right(lm, labels)
        target_text = target
        note = "given (teacher-forced on it)" + (f"; {dropped} tokens dropped from its end" if dropped else "")
    else:
        cap = int(max_new_tokens or options.get("max_new_tokens") or default_max_new_tokens(len(source.ids)))
        if not 1 <= cap <= max(MAX_NEW_TOKENS, 1):
            raise NormvizError(f"max_new_tokens must be between 1 and {MAX_NEW_TOKENS}, got {cap}.")
        tgt_ids, labels, ended = generate(lm, source.ids, min(cap, limit))
        dropped = 0
        target_text = lm.tokenizer.decode(labels, skip_special_tokens=True)
        note = (
            f"generated greedily ({len(labels)} tokens, "
            + ("ended with the end-of-sentence token" if ended else f"cut at max_new_tokens={min(cap, limit)}")
            + "), then teacher-forced on the generated ids"
        )
    return Seq2SeqInputs(
        source, encoded_ids(lm.tokenizer, tgt_ids, dropped), encoded_ids(lm.tokenizer, labels), target_text, note
    )


def from_ids(lm, src_ids: list[int], tgt_ids: list[int], out_ids: list[int] | None = None) -> Seq2SeqInputs:
    """Given ids: ``src_ids`` the encoder's input, ``tgt_ids`` the decoder's (start token first); ``out_ids``
    the labels (default: tgt_ids[1:] + the eos id). Tokens from the tokenizer when the model has one, else
    the ids as text."""
    require_seq2seq(lm)
    eos = getattr(lm.config, "eos_token_id", None)
    out_ids = list(out_ids) if out_ids is not None else list(tgt_ids[1:]) + ([int(eos)] if eos is not None else [])

    def enc(ids):
        if lm.tokenizer is not None:
            return encoded_ids(lm.tokenizer, ids)
        return Encoded(
            ids=list(ids),
            tokens=[str(i) for i in ids],
            labels=[str(i) for i in ids],
            special=[False] * len(ids),
            dropped=0,
        )

    text = lm.tokenizer.decode(out_ids, skip_special_tokens=True) if lm.tokenizer is not None else ""
    return Seq2SeqInputs(enc(src_ids), enc(tgt_ids), enc(out_ids), text, "given as ids")


__all__ = [
    "MAX_NEW_TOKENS",
    "Seq2SeqInputs",
    "default_max_new_tokens",
    "from_ids",
    "generate",
    "prepare",
    "shift_right",
    "target_labels",
]

"""Subword tokens grouped into the words of a whitespace-split sentence (what gold alignments index).

Schemes, told apart by their markers (``auto``):

- ``sentencepiece`` (Marian, T5, mBART, NLLB): a token starting with ``▁`` begins a word;
- ``byte-bpe`` (GPT-2 style, BART): a token starting with ``Ġ`` begins a word;
- ``wordpiece`` (BERT): a token starting with ``##`` continues the previous word;
- ``bpe`` (subword-nmt, fairseq): a token ending with ``@@`` continues into the next one;
- ``word``: one token per word (the embedded toy-mt model).

Special tokens (eos, pad, language codes) belong to no word. The first ordinary token always begins a word,
as in Kobayashi et al.'s ``convert_bpe_word`` (their SentencePiece ran without a dummy prefix).
"""

from __future__ import annotations

SCHEMES = ("auto", "sentencepiece", "byte-bpe", "wordpiece", "bpe", "word")


def detect_scheme(tokens: list[str], special=frozenset()) -> str:
    ordinary = [t for t in tokens if t not in special]
    if any(t.startswith("▁") for t in ordinary):
        return "sentencepiece"
    if any(t.startswith("Ġ") for t in ordinary):
        return "byte-bpe"
    if any(t.startswith("##") and len(t) > 2 for t in ordinary):
        return "wordpiece"
    if any(t.endswith("@@") and len(t) > 2 for t in ordinary):
        return "bpe"
    return "word"


def word_groups(tokens: list[str], special=frozenset(), scheme: str = "auto") -> list[list[int]]:
    """Token indices of each word, in order; tokens in ``special`` are left out."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown subword scheme {scheme!r}; use one of {', '.join(SCHEMES)}")
    if scheme == "auto":
        scheme = detect_scheme(tokens, special)
    groups: list[list[int]] = []
    glue_next = False  # bpe: the previous token ended with @@
    for i, tok in enumerate(tokens):
        if tok in special:
            continue
        if scheme == "sentencepiece":
            new = tok.startswith("▁")
        elif scheme == "byte-bpe":
            new = tok.startswith("Ġ")
        elif scheme == "wordpiece":
            new = not tok.startswith("##")
        elif scheme == "bpe":
            new, glue_next = not glue_next, tok.endswith("@@")
        else:
            new = True
        if new or not groups:
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def special_tokens(tokenizer) -> frozenset:
    """The tokenizer's special tokens that stand for no word (its unknown-word token is a word)."""
    unk = getattr(tokenizer, "unk_token", None)
    return frozenset(t for t in getattr(tokenizer, "all_special_tokens", ()) if t != unk)

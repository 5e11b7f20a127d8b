"""Word alignment of a parallel corpus with one encoder–decoder: predicted links for every layer, head, method
(weights, norms) and setting (AWI, AWO), and their AER against a gold alignment.

Lines are 1-based as in an editor. A line that cannot be used (empty, undecodable, longer than the model's
window, gold links outside the sentence, a tokenisation whose word count differs from the line's
whitespace-separated words) is listed in ``bad_lines`` with its reason, leaves an empty line in the
predicted files and is left out of the AER.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.errors import NormvizError, TruncationWarning
from .aer import AerCounts
from .extract import KEYS, SETTINGS, head_label, links, sentence_alignments, sentence_words
from .formats import read_text_file
from .words import special_tokens


@dataclass
class AlignResult:
    n_layers: int
    n_heads: int
    n_lines: int
    # (method, setting) -> one entry per line: int array [L, H+1, T] (−1: no link), None for a bad line
    best: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)  # (method, setting, layer, head index) -> AerCounts
    bad_lines: list = field(default_factory=list)  # (line, reason)
    has_gold: bool = False

    def predicted(self, method: str, setting: str, layer: int, head: int | str = "all") -> list:
        """The predicted links of every line (a set; None for a bad line) for one view."""
        h = self.n_heads if head == "all" else int(head)
        return [None if b is None else links(b[layer, h]) for b in self.best[method, setting]]

    def aer_rows(self) -> list[dict]:
        """Rows of aer.csv: method, setting, layer, head (number or ``all``), aer."""
        rows = []
        for (method, setting, layer, h), c in self.counts.items():
            rows.append(
                {
                    "method": method,
                    "setting": setting,
                    "layer": layer,
                    "head": head_label(h, self.n_heads),
                    "aer": c.aer,
                }
            )
        return rows

    def aer(self, method: str, setting: str, layer: int, head: int | str = "all") -> float:
        h = self.n_heads if head == "all" else int(head)
        return self.counts[method, setting, layer, h].aer

    def layer_table(self) -> np.ndarray:
        """AER of the layer views: [L, 4] in the column order of :data:`TABLE_COLUMNS`."""
        return np.array([[self.aer(m, s, l) for s, m in TABLE_COLUMNS] for l in range(self.n_layers)])


UNREADABLE = "unreadable"
TABLE_COLUMNS = [(s, m) for s in SETTINGS for m in ("weight", "norm")]


def read_lines(path: str | Path, what: str) -> tuple[list[str | None], list]:
    """Lines of a text file (:func:`read_text_file`), None where a line is not valid UTF-8 or holds a NUL
    byte, and the ``(line, reason)`` of those."""
    out, bad = [], []
    for k, line in enumerate(read_text_file(path, what).splitlines(), 1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            out.append(None)
            bad.append((k, f"{what}: not valid UTF-8 (byte {exc.start})"))
            continue
        if "\x00" in text:
            out.append(None)
            bad.append((k, f"{what}: holds a NUL byte (character {text.index(chr(0)) + 1}); is the file UTF-16?"))
            continue
        out.append(text)
    return out, bad


def _check_gold(sure, possible, n_src: int, n_tgt: int, fmt: str) -> str | None:
    out = [(s, t) for s, t in possible if s >= n_src or t >= n_tgt]
    if not out:
        return None
    s, t = out[0]
    hint = " (a 1-based talp file? pass --gold-format talp)" if fmt == "pharaoh" else ""
    return f"gold link {s}-{t} outside the sentence ({n_src} source, {n_tgt} target words){hint}"


def align_corpus(
    lm,
    src: list,
    tgt: list,
    gold: list | None = None,
    *,
    gold_format: str = "pharaoh",
    scheme: str = "auto",
    max_tokens: int | None = None,
    known_bad: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
    show_bar: bool = False,
) -> AlignResult:
    """Align ``src[k]`` with ``tgt[k]`` (strings; None = unreadable) for every k; ``gold[k]`` is the
    ``(sure, possible)`` of line k+1 (None = unreadable). ``known_bad``: line -> why it is unreadable (from
    the readers). ``progress(done, total)`` after each line. Raises NormvizError when no line can be aligned
    (with or without gold), naming the first reasons."""
    from tqdm.auto import tqdm

    from ..session.session import Session

    if len(src) != len(tgt):
        raise NormvizError(
            f"the source file has {len(src)} lines and the target file {len(tgt)}; they must pair line by line."
        )
    if gold is not None and len(gold) != len(src):
        raise NormvizError(
            f"the gold alignment has {len(gold)} lines and the parallel files {len(src)}; they must pair line by line."
        )
    if not getattr(lm.config, "is_encoder_decoder", False):
        raise NormvizError(
            f"{lm.name!r} is not an encoder–decoder model; word alignment reads the "
            "cross-attention of a translation model (toy-mt, or a Marian/BART/T5 directory)."
        )
    special = special_tokens(lm.tokenizer)
    res = AlignResult(lm.n_layers, lm.n_heads, len(src), has_gold=gold is not None)
    for m in ("weight", "norm"):
        for s in SETTINGS:
            res.best[m, s] = []
    bar = tqdm(total=len(src), unit="line", desc="align", disable=not show_bar)
    for k, (s_line, t_line) in enumerate(zip(src, tgt)):
        line = k + 1
        reason, best = _one(
            lm,
            s_line,
            t_line,
            None if gold is None else gold[k],
            gold is not None,
            special,
            scheme,
            max_tokens,
            gold_format,
            Session,
        )
        if reason == UNREADABLE:
            reason = (known_bad or {}).get(line, "unreadable line")
        if reason:
            res.bad_lines.append((line, reason))
        for key in res.best:
            res.best[key].append(None if best is None else best[key])
        if best is not None:  # the cross block's own layer and head counts (a decoder may differ from the encoder)
            res.n_layers, res.n_heads = best["norm", "AWI"].shape[0], best["norm", "AWI"].shape[1] - 1
        if best is not None and gold is not None:
            sure, possible = gold[k]
            for (method, setting), b in best.items():
                L, H1, _ = b.shape
                for l in range(L):
                    for h in range(H1):
                        res.counts.setdefault((method, setting, l, h), AerCounts()).add(links(b[l, h]), sure, possible)
        bar.update(1)
        if progress:
            progress(line, len(src))
    bar.close()
    if len(res.bad_lines) == res.n_lines:
        raise NormvizError(f"none of the {res.n_lines:,} lines could be aligned ({_first_reasons(res.bad_lines)}).")
    return res


def _first_reasons(bad: list, k: int = 3, width: int = 90) -> str:
    """'line 1: why; line 2: why; … and N more' on one line."""
    parts = [f"line {line}: {' '.join(str(r).split())[:width]}" for line, r in bad[:k]]
    return "; ".join(parts) + (f"; and {len(bad) - k:,} more" if len(bad) > k else "")


def _one(lm, s_line, t_line, gold_entry, has_gold, special, scheme, max_tokens, gold_format, Session):
    """(reason, best): reason why the line is bad (or None), best = sentence_alignments (or None)."""
    if s_line is None or t_line is None:
        return UNREADABLE, None
    if not s_line.strip():
        return "empty source line", None
    if not t_line.strip():
        return "empty target line", None
    if has_gold and gold_entry is None:
        return UNREADABLE, None
    n_src, n_tgt = len(s_line.split()), len(t_line.split())
    if has_gold:
        bad = _check_gold(*gold_entry, n_src, n_tgt, gold_format)
        if bad:
            return bad, None
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        try:
            a = Session(lm, s_line, target=t_line, max_tokens=max_tokens).get(list(KEYS))
        except TruncationWarning:
            return "longer than the model's window (or --max-tokens)", None
        except NormvizError as exc:
            return " ".join(str(exc).split()), None
    words = sentence_words(a.src_tokens, a.tgt_tokens, special, scheme)
    if words.n_src != n_src:
        return f"the source is tokenised into {words.n_src} words, the line has {n_src} (split on spaces)", None
    if words.n_tgt != n_tgt:
        return f"the target is tokenised into {words.n_tgt} words, the line has {n_tgt} (split on spaces)", None
    return None, sentence_alignments(a, words)

"""One forward pass that records every stack of a model, run on first need, shared by the sequences of a batch.

    Recording.text_batch(lm, [Encoded, …])   a self-attention model: one right-padded pass; part b has
                                              the stack {"model": [LayerRecord per layer]}
    Recording.seq2seq(lm, Seq2SeqInputs)      an encoder–decoder: one teacher-forced pass; its one part has
                                              {"encoder": […], "decoder": […], "cross": [CrossRecord …]}

A :class:`Part` is what one session reads: each stack's token axis (``axes``), its records, notes about how
its input was encoded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from ..core.tokens import Encoded, pad_batch
from .encdec.record import record_seq2seq
from .encdec.target import Seq2SeqInputs
from .floor import record as record_floor
from .recorder import record, segment_ids


class Recording:
    """``run(full)`` → one {stack: records} per sequence (and the raw record of each), called once, on first need.

    ``full=False`` (asked for the families whose ``RECORD`` is ``"attention"``: they read only the attention
    blocks): the run may stop after the last layer's attention block (:func:`normviz.record.recorder.record`'s
    ``upto``); the first reader that needs the rest (``full=True``, the default) then records again, fully —
    the same numbers up to there — and :attr:`passes` counts both."""

    def __init__(self, run: Callable[..., tuple[list[dict], list]], can_stop: bool = False):
        self._run = run
        self._can_stop = can_stop
        self._records: list[dict] | None = None
        self._raw: list | None = None
        self._partial = False
        self._lock = threading.Lock()
        self.passes = 0

    def _ensure(self, full: bool, alpha: bool = False, ff: int = 0) -> None:
        with self._lock:
            if self._records is None or (self._partial and full):
                partial = self._can_stop and not full
                self._records, self._raw = self._run(not partial, alpha, ff)
                self._partial = partial
                self.passes += 1

    def records(self, b: int, full: bool = True, alpha: bool = False, ff: int = 0) -> dict:
        """``alpha``: the first reader keeps every layer's α (the ``attention`` map), so a pass recorded now may
        record α itself rather than q, k (:func:`normviz.record.recorder.records_qk`'s ``keep_alpha``); ``ff``: the
        first reader is explain, so a pass recorded now keeps up to that many bytes of FF pre-activations
        (``keep_ff``)."""
        self._ensure(full, alpha, ff)
        return self._records[b]

    def raw(self, b: int, record: bool = True):
        """The full pass's raw record of sequence b; ``record=False``: None unless that pass has run."""
        if not record:
            return None if self._raw is None or self._partial else self._raw[b]
        self._ensure(True)
        return self._raw[b]

    # ---- the kinds of model
    @classmethod
    def text_batch(cls, lm, encoded: list[Encoded], attention: str = "auto") -> list["Part"]:
        """Parts of several tokenised texts of a self-attention model, recorded in one right-padded pass.
        ``attention``: record α or q, k (:func:`normviz.record.recorder.records_qk`; option ``record_attention``)."""

        def run(full: bool, alpha: bool = False, ff: int = 0):
            ids, mask, types = pad_batch(encoded, pad_id=0, with_token_types=True)
            if getattr(lm, "note", None):  # the raw-attention floor (no architecture row): α, blocks' in and out
                recs = record_floor(lm, ids, mask, segment_ids(lm, types))
            else:
                recs = record(
                    lm,
                    ids,
                    mask,
                    segment_ids(lm, types),
                    attention,
                    upto=None if full else "attention",
                    keep_alpha=alpha,
                    keep_ff=ff,
                )
            return [{"model": r} for r in recs], recs

        recording = cls(run, can_stop=True)
        floor = {"architecture": lm.note} if getattr(lm, "note", None) else {}  # the raw-attention floor's note
        return [Part(recording, b, {"model": enc}, {**_pair_notes(lm, enc), **floor}) for b, enc in enumerate(encoded)]

    @classmethod
    def seq2seq(cls, lm, inputs: Seq2SeqInputs) -> "Part":
        """The part of one source and target of an encoder–decoder."""

        def run(full: bool, alpha: bool = False, ff: int = 0):
            rec = record_seq2seq(lm, inputs.source.ids, inputs.target.ids)
            return [{"encoder": rec.encoder, "decoder": rec.decoder, "cross": rec.cross}], [rec]

        return Part(cls(run), 0, {"encoder": inputs.source, "decoder": inputs.target}, {"target": inputs.note}, inputs)


def _pair_notes(lm, enc: Encoded) -> dict[str, str]:
    """How a sentence pair was encoded (``Analysis.notes["pair"]``)."""
    note = enc.note
    if note and enc.token_type_ids and any(enc.token_type_ids):
        import torch

        if segment_ids(lm, torch.tensor([enc.token_type_ids])) is None:
            note += "; this model has no segment embeddings for them, so they were not passed"
    return {"pair": note} if note else {}


@dataclass
class Part:
    """One sequence of a recording: its stacks' token axes (rows; the cross stack's rows are the decoder's and
    its columns the encoder's), its records on first need, notes on its input."""

    recording: Recording
    index: int
    axes: dict[str, Encoded]
    notes: dict[str, str] = field(default_factory=dict)
    seq2seq: Seq2SeqInputs | None = None  # an encoder–decoder's source, target and labels

    def records(self, stack: str, full: bool = True, alpha: bool = False, ff: int = 0) -> list:
        """``full=False``: the last layer's record may stop after its attention block (see :class:`Recording`);
        ``alpha``, ``ff``: see :meth:`Recording.records`."""
        return self.recording.records(self.index, full, alpha, ff)[stack]

    def raw(self, record: bool = True):
        """The pass's own record of this sequence (a Seq2SeqRecord for an encoder–decoder), of the full pass;
        ``record=False``: None when the pass has not run."""
        return self.recording.raw(self.index, record)

    @property
    def passes(self) -> int:
        return self.recording.passes


__all__ = ["Part", "Recording"]

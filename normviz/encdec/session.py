"""``Session(lm, source, target=…)`` for an encoder–decoder: one source text and its target, recorded once.

    source ─ tokenise ─► src ids s (the encoder's input; columns of the cross maps)
    target ─ tokenise ─► labels y (given: teacher-forced on the reference; None: generated greedily, capped)
    decoder input ids t = shift_right(y): the decoder start token, then y without its last token (rows)

Row r of every decoder and cross map is fed t_r and predicts y_r (= t_{r+1}; the last row predicts the eos).
One forward pass on (s, t) records the encoder, the decoder's self-attention and every cross block
(:mod:`normviz.encdec.record`); ``get(keys)`` then computes only keys not computed yet:

    encoder_<key>  the families of :mod:`normviz.methods` on the encoder's records (a plain Session of the
                   encoder stack, sharing the pass), decoder_<key> likewise on the decoder's self-attention,
                   cross_… from :mod:`normviz.encdec.cross`.
"""
from __future__ import annotations

import threading
import warnings
from typing import Iterable

import numpy as np
import torch

from .. import methods as registry
from ..analysis import Analysis
from ..decompose import CHUNK_BYTES
from ..errors import NormvizError, NotApplicableError, TooCostlyError, TruncationWarning, UnsupportedModelError
from ..record import model_lock
from ..session import Progress, Session
from ..tokens import MAX_CHARS_PER_TOKEN, Encoded, encode, encoded_ids
from . import cross as cross_maps
from . import keys as keyspace
from .params import cross_params, decoder_view, require_seq2seq
from .record import record_seq2seq

MAX_NEW_TOKENS = 256  # the bound of a generated target


def default_max_new_tokens(n_source: int) -> int:
    """2 × source tokens + 10, at most MAX_NEW_TOKENS."""
    return min(MAX_NEW_TOKENS, 2 * n_source + 10)


# ---------------------------------------------------------------- the target's ids
def target_labels(lm, target: str, limit: int) -> tuple[list[int], int]:
    """The tokenizer's target ids of ``target`` (``text_target``: Marian's target vocabulary), cut to
    ``limit`` with a TruncationWarning; (labels, dropped)."""
    tok = lm.tokenizer
    cap = limit * MAX_CHARS_PER_TOKEN  # bounded time and memory, as for the source (normviz.tokens.encode)
    if len(target) > cap:
        warnings.warn(f"The target is {len(target):,} characters long, more than {MAX_CHARS_PER_TOKEN} per token of "
                      f"the limit of {limit}; it was cut to {cap:,} characters before tokenising.", TruncationWarning,
                      stacklevel=4)
        target = target[:cap]
    labels = list(tok(text_target=target, add_special_tokens=True)["input_ids"])
    if not labels:
        raise NormvizError("The target gave no tokens. Type a translation, or leave it empty to generate one.")
    dropped = max(0, len(labels) - limit)
    if dropped:
        labels = labels[:limit]
        warnings.warn(f"The target is {len(labels) + dropped} tokens long, more than the limit of {limit}; "
                      f"{dropped} tokens were dropped from the end.", TruncationWarning, stacklevel=4)
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
        raise UnsupportedModelError(f"{lm.name!r} has no language-model head, so it cannot generate a target; "
                                    "pass the target text (target=…, --target).")
    src = torch.tensor([list(src_ids)], device=lm.device)
    # transformers sizes the KV cache by config.num_hidden_layers, the encoder's depth: a T5 whose decoder is
    # deeper (num_decoder_layers) must generate without one
    use_cache = len(decoder_view(lm).layers) == getattr(lm.config, "num_hidden_layers", None)
    with model_lock(lm.model), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # generation-config notices (beams overridden …)
        seq = lm.model.generate(input_ids=src, attention_mask=torch.ones_like(src), max_new_tokens=max_new_tokens,
                                num_beams=1, do_sample=False, use_cache=use_cache, forced_eos_token_id=None)[0].tolist()
    eos = lm.model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    return seq[:-1], seq[1:], bool(seq[1:]) and seq[-1] in eos


# ---------------------------------------------------------------- the shared recording pass
class _Pass:
    """The one forward pass of a session, run on first need; ``stack(name)`` is what a plain Session of that
    stack reads as its recording."""

    def __init__(self, lm, src_ids, tgt_ids):
        self.lm, self.src_ids, self.tgt_ids = lm, src_ids, tgt_ids
        self._record = None
        self._lock = threading.Lock()
        self.passes = 0

    def get(self):
        with self._lock:
            if self._record is None:
                self._record = record_seq2seq(self.lm, self.src_ids, self.tgt_ids)
                self.passes += 1
            return self._record

    def stack(self, name: str) -> "_StackRecording":
        return _StackRecording(self, name)


class _StackRecording:
    def __init__(self, shared: _Pass, name: str):
        self.shared, self.name = shared, name

    @property
    def passes(self) -> int:
        return self.shared.passes

    def records(self, b: int):
        return getattr(self.shared.get(), self.name)


def _scaled(progress: Progress | None, lo: float, hi: float, stack: str) -> Progress | None:
    """A stack's progress (0…1) reported as lo…hi of the whole."""
    if progress is None:
        return None
    return lambda fraction, message: progress(lo + (hi - lo) * fraction, f"{stack}: {message}")


def _stack_session(lm, enc: Encoded, text: str, options: dict, recording: _StackRecording) -> Session:
    s = Session.__new__(Session)
    s._setup(lm, enc, text, None, options, recording, 0)
    return s


# ---------------------------------------------------------------- the session
class Seq2SeqSession:
    """One source text and its target (given, or generated greedily when None) of an encoder–decoder.

    ``max_tokens`` (default: the model's window) truncates the source and a given target; ``max_new_tokens``
    (or option ``max_new_tokens``) caps a generated target (default 2 × source tokens + 10, at most 256).
    ``options`` go to every family.
    ``normviz.Session(lm, …)`` returns one of these when ``lm.is_encoder_decoder``."""

    def __init__(self, lm, text: str, text_pair: str | None = None, *, target: str | None = None,
                 max_tokens: int | None = None, max_new_tokens: int | None = None, options: dict | None = None):
        require_seq2seq(lm)
        if text_pair is not None and str(text_pair).strip():
            raise NormvizError("An encoder–decoder model takes a source text and a target (target=…, --target), "
                               "not a sentence pair (text_pair, --text-pair).")
        limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
        self.options = dict(options or {})
        self.source = encode(lm.tokenizer, text, None, max_length=limit)
        if target is not None and str(target).strip():
            labels, dropped = target_labels(lm, target, limit)
            tgt_ids = shift_right(lm, labels)
            self.target_text, self.generated = target, False
            note = "given (teacher-forced on it)" + (f"; {dropped} tokens dropped from its end" if dropped else "")
        else:
            cap = int(max_new_tokens or self.options.get("max_new_tokens") or default_max_new_tokens(len(self.source.ids)))
            if not 1 <= cap <= max(MAX_NEW_TOKENS, 1):
                raise NormvizError(f"max_new_tokens must be between 1 and {MAX_NEW_TOKENS}, got {cap}.")
            tgt_ids, labels, ended = generate(lm, self.source.ids, min(cap, limit))
            dropped = 0
            self.target_text, self.generated = lm.tokenizer.decode(labels, skip_special_tokens=True), True
            note = (f"generated greedily ({len(labels)} tokens, "
                    + ("ended with the end-of-sentence token" if ended else f"cut at max_new_tokens={min(cap, limit)}")
                    + "), then teacher-forced on the generated ids")
        self._setup(lm, self.source, encoded_ids(lm.tokenizer, tgt_ids, dropped), encoded_ids(lm.tokenizer, labels),
                    text, note, self.options)

    @classmethod
    def from_ids(cls, lm, src_ids: list[int], tgt_ids: list[int], out_ids: list[int] | None = None,
                 options: dict | None = None) -> "Seq2SeqSession":
        """A session of given ids: ``src_ids`` the encoder's input, ``tgt_ids`` the decoder's (start token
        first); ``out_ids`` the labels (default: tgt_ids[1:] + the eos id). Tokens from the tokenizer when
        the model has one, else the ids as text."""
        require_seq2seq(lm)
        eos = getattr(lm.config, "eos_token_id", None)
        out_ids = list(out_ids) if out_ids is not None else list(tgt_ids[1:]) + ([int(eos)] if eos is not None else [])

        def enc(ids):
            if lm.tokenizer is not None:
                return encoded_ids(lm.tokenizer, ids)
            return Encoded(ids=list(ids), tokens=[str(i) for i in ids], labels=[str(i) for i in ids],
                           special=[False] * len(ids), dropped=0)

        s = cls.__new__(cls)
        s.generated = False
        s.target_text = lm.tokenizer.decode(out_ids, skip_special_tokens=True) if lm.tokenizer is not None else ""
        s._setup(lm, enc(src_ids), enc(tgt_ids), enc(out_ids), "", "given as ids", dict(options or {}))
        return s

    def _setup(self, lm, source: Encoded, target: Encoded, labels: Encoded, text: str, note: str,
               options: dict) -> None:
        self.lm, self.text, self.options = lm, text, options
        self.source, self.target, self.labels_encoded = source, target, labels
        self.notes = {"target": note}
        self._pass = _Pass(lm, source.ids, target.ids)
        self.encoder = _stack_session(lm, source, text, options, self._pass.stack("encoder"))
        self.decoder = _stack_session(decoder_view(lm), target, self.target_text, options, self._pass.stack("decoder"))
        self._cross: dict[str, np.ndarray] = {}
        self._lock = threading.RLock()

    # ---- what is known without computing
    @property
    def src_tokens(self) -> list[str]:
        return self.source.tokens

    @property
    def tgt_tokens(self) -> list[str]:
        return self.target.tokens

    tokens = src_tokens

    @property
    def forward_passes(self) -> int:
        return self._pass.passes

    def computed(self) -> list[str]:
        return ([keyspace.ENCODER + k for k in self.encoder.computed()]
                + [keyspace.DECODER + k for k in self.decoder.computed()] + list(self._cross))

    def _sub(self, key: str) -> tuple[Session | None, str]:
        stack, base = keyspace.split(key)
        return {"encoder": self.encoder, "decoder": self.decoder}.get(stack), base

    def check(self, key: str) -> None:
        """Raise NotApplicableError or TooCostlyError when ``key`` would be refused; runs nothing."""
        keyspace.check(self.lm, key)
        sub, base = self._sub(key)
        if sub is not None:
            registry.check(sub.request, base, sub.options)

    def refusal(self, key: str) -> str | None:
        """Why ``key`` would be refused for this input (applicability, cost), or None; runs nothing."""
        try:
            self.check(key)
        except (TooCostlyError, NotApplicableError) as exc:
            return str(exc)
        return None

    def records(self):
        """The :class:`~normviz.encdec.record.Seq2SeqRecord` (records on first call)."""
        return self._pass.get()

    # ---- predictions on the decoder rows (normviz.attribution: they ride the one recorded pass)
    def predict(self, top: int = 10, position: int = -1):
        """The ``top`` most probable next target tokens after decoder row ``position``."""
        from ..attribution import predict
        return predict(self.decoder, top, position)

    def explain(self, token=None, foil=None, position: int = -1):
        """Why ``token`` rather than ``foil`` after decoder row ``position`` (sources over source + target)."""
        from .explain import explain
        with self._lock:
            return explain(self, token, foil, position)

    def logit_lens(self, position: int = -1):
        """[L+1, V] log-probabilities of each decoder layer's residual state at row ``position``."""
        from ..attribution import logit_lens
        return logit_lens(self.decoder, position)

    # ---- maps
    def get(self, keys: Iterable[str] | str | None = None, *, strict: bool = True,
            progress: Progress | None = None) -> Analysis:
        """The maps ``keys`` (see :mod:`normviz.encdec.keys`; None: every default key) as an Analysis.

        Every key is checked before anything runs; ``strict``: raise the first refusal (NotApplicableError,
        TooCostlyError); otherwise refused keys are left out and listed in ``Analysis.refused``."""
        with self._lock:
            wanted = keyspace.expand(self.lm, keys)
            refused: dict[str, NormvizError] = {}
            for k in wanted:
                try:
                    self.check(k)
                except (TooCostlyError, NotApplicableError) as exc:
                    refused[k] = exc
            if strict and refused:
                raise next(iter(refused.values()))
            ok = [k for k in wanted if k not in refused]
            for stack, lo, hi in (("encoder", 0.0, 0.6), ("decoder", 0.6, 0.9)):
                ks = [keyspace.split(k)[1] for k in ok if keyspace.split(k)[0] == stack]
                if ks:
                    a = getattr(self, stack).get(ks, strict=strict, progress=_scaled(progress, lo, hi, stack))
                    refused.update({f"{stack}_{k}": NotApplicableError(why) for k, why in a.refused.items()})
            cross_todo = [k for k in ok if k in keyspace.CROSS_KEYS and k not in self._cross]
            if cross_todo:
                self._compute_cross(cross_todo, _scaled(progress, 0.9, 1.0, "cross"))
            return self._analysis(wanted, refused)

    def _compute_cross(self, keys: list[str], progress) -> None:
        rec = self.records()
        n_layers = len(rec.cross)
        params = [cross_params(self.lm, i) for i in range(n_layers)]
        chunk = int(self.options.get("chunk_bytes", CHUNK_BYTES))
        self._cross.update(cross_maps.compute(rec.cross, params, keys, chunk_bytes=chunk, progress=progress))

    def _array(self, key: str):
        if key in self._cross:
            return self._cross[key]
        sub, base = self._sub(key)
        return sub._arrays.get(base) if sub is not None else None

    def _analysis(self, wanted: list[str], refused: dict) -> Analysis:
        lm, src, tgt, out = self.lm, self.source, self.target, self.labels_encoded
        arrays = {k: self._array(k) for k in wanted if k not in refused and self._array(k) is not None}
        notes = dict(self.notes)
        for k in arrays:
            sub, base = self._sub(k)
            if sub is not None and base in sub._notes:
                notes[k] = sub._notes[base]
        rec = self._pass._record
        return Analysis(
            model_name=lm.name, model_type=lm.model_type, placement=lm.spec.placement, causal=False,
            tokens=src.tokens, labels=src.labels, token_ids=src.ids, special=np.array(src.special, dtype=bool),
            arrays=arrays, n_layers=lm.n_layers, n_heads=lm.n_heads, dtype=str(lm.dtype).replace("torch.", ""),
            device=str(lm.device), text=self.text, dropped=src.dropped, notes=notes,
            refused={k: str(refused[k]) for k in wanted if k in refused},
            tgt_special=np.array(tgt.special, dtype=bool), src_tokens=src.tokens, tgt_tokens=tgt.tokens, out_tokens=out.tokens, src_labels=src.labels,
            tgt_labels=tgt.labels, out_labels=out.labels, src_ids=src.ids, tgt_ids=tgt.ids, out_ids=out.ids,
            predicted_ids=rec.predicted if rec is not None else None, target_text=self.target_text,
        )


__all__ = ["Seq2SeqSession", "default_max_new_tokens", "generate", "shift_right", "target_labels"]

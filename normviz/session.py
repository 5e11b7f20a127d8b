"""``Session(lm, text)``: one text, recorded once; ``session.get(keys)`` computes only what is missing.

    text ─ tokenise ─► Session ─ first get() that needs records ─► one forward pass (records kept)
                                 get(keys) ─► each family's check (before the pass) ─► compute ─► Analysis

The records are the cache (like TransformerLens' ``ActivationCache``): asking for more map keys later
never reruns the model, and keys computed once are memoised. Several texts recorded in one padded
forward pass are a batch of sessions (:meth:`Session.batch`), which the corpus engine uses too.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterable

import numpy as np

from . import methods as registry
from .analysis import Analysis
from .decompose import CHUNK_BYTES, LayerDecomposition, Workspace
from .errors import NormvizError, NotApplicableError, TooCostlyError, UnknownMethodError
from .methods.base import Inputs, Request
from .models.loading import LoadedModel
from .record import model_lock, record, segment_ids
from .tokens import Encoded, encode, pad_batch

Progress = Callable[[float, str], None]


def resolve_keys(lm: LoadedModel, keys: Iterable[str] | None) -> list[str]:
    """Map keys (or family names, or ``"all"``) → the keys to compute, each after the keys it requires.
    ``None``: every default (not opt-in) key of this model."""
    placement = lm.spec.placement
    if keys is None:
        wanted = registry.all_keys(placement, include_opt_in=False)
    else:
        if isinstance(keys, str):
            keys = [keys]
        wanted = []
        for name in keys:
            name = name.strip()
            if not name:
                continue
            if name == "all":
                wanted += registry.all_keys(placement, include_opt_in=False)
            elif name in registry.families():
                wanted += [i.key for i in registry.families()[name].KEYS if placement in i.placements]
            else:
                registry.lookup(name)  # unknown keys are refused by name
                wanted.append(name)
    out: list[str] = []

    def add(k: str) -> None:
        if k in out:
            return
        for req in registry.requires(k):
            add(req)
        out.append(k)

    for k in wanted:
        add(k)
    return out


def request_for(lm: LoadedModel, n_tokens: int) -> Request:
    d, d_ff = lm.sizes
    return Request(n_tokens=n_tokens, n_layers=lm.n_layers, n_heads=lm.n_heads, d_model=d, d_ff=d_ff,
                   placement=lm.spec.placement, causal=lm.spec.causal, gated=lm.spec.ff_kind == "gated",
                   device=lm.device.type)


class _Recording:
    """One padded forward pass shared by the sessions of a batch, run on first need."""

    def __init__(self, lm: LoadedModel, encoded: list[Encoded]):
        self.lm, self.encoded = lm, encoded
        self._records = None
        self._lock = threading.Lock()
        self.passes = 0

    def records(self, b: int):
        with self._lock:
            if self._records is None:
                ids, mask, types = pad_batch(self.encoded, pad_id=0, with_token_types=True)
                self._records = record(self.lm, ids, mask, segment_ids(self.lm, types))
                self.passes += 1
            return self._records[b]


class Session:
    """One text (or sentence pair) of one model: tokenised now, recorded on first need, maps on demand.

    A pair is the model's real pair input: encoders get the tokenizer's segment ids (``token_type_ids``) in
    the recording pass; decoders get the two texts joined by a separator token (see :mod:`normviz.tokens`).
    How it was encoded is ``Analysis.notes["pair"]``.

    ``max_tokens`` (default: the model's window) truncates with a TruncationWarning. ``options`` go to every
    family (e.g. ``rollout_normalization``, ``ff_budget_s``, ``flow_max_tokens``, ``chunk_bytes``).
    ``worker``: a :class:`normviz.workers.HeavyWorker` that computes the costly families in another process
    (the app's server gives one, so that one visitor's heavy maps do not slow down another's short request)."""

    def __new__(cls, lm: LoadedModel | None = None, *args, **kwargs):
        """An encoder–decoder model gets a :class:`normviz.encdec.Seq2SeqSession` (source, ``target=``)."""
        if cls is Session and getattr(lm, "is_encoder_decoder", False):
            from .encdec.session import Seq2SeqSession

            return Seq2SeqSession(lm, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, lm: LoadedModel, text: str, text_pair: str | None = None, *, max_tokens: int | None = None,
                 options: dict | None = None, worker=None, target: str | None = None):
        if target is not None:
            raise NormvizError(f"target= is for encoder–decoder models; {lm.name!r} is not one.")
        limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
        enc = encode(lm.tokenizer, text, text_pair, max_length=limit, decoder=lm.spec.causal)
        self._setup(lm, enc, text, text_pair, options, _Recording(lm, [enc]), 0)
        self.worker = worker
        if worker is not None:
            worker.prepare(self)

    worker = None  # sessions of a batch (Session.batch, from_encoded) compute everything here

    def _setup(self, lm, enc: Encoded, text, text_pair, options, recording: _Recording, index: int) -> None:
        if enc.note and enc.token_type_ids and any(enc.token_type_ids):
            import torch

            if segment_ids(lm, torch.tensor([enc.token_type_ids])) is None:
                enc.note += "; this model has no segment embeddings for them, so they were not passed"
        self.lm, self.encoded = lm, enc
        self.text, self.text_pair = text, (text_pair if text_pair and str(text_pair).strip() else None)
        self.options = dict(options or {})
        self._recording, self._index = recording, index
        self._arrays: dict = {}
        self._notes: dict[str, str] = {}
        self._lock = threading.RLock()
        self._views: list[LayerDecomposition] | None = None
        self._waits = threading.local()  # seconds the current get() of each thread waited for other requests

    def add_wait(self, seconds: float) -> None:
        """Count ``seconds`` as waited for another request in the current get() (:mod:`normviz.workers`)."""
        self._waits.s = getattr(self._waits, "s", 0.0) + float(seconds)

    # ---- constructors for several texts (one padded forward pass)
    @classmethod
    def from_encoded(cls, lm: LoadedModel, encoded: list[Encoded], texts: list[tuple[str, str | None]] | None = None,
                     options: dict | None = None) -> list["Session"]:
        """Sessions of already tokenised sequences that share one recording pass."""
        if lm.is_encoder_decoder:
            from .errors import UnsupportedModelError

            raise UnsupportedModelError(f"{lm.name!r} is an encoder–decoder: analyse one source and target at a "
                                        "time with Session(lm, source, target=…).")
        recording = _Recording(lm, list(encoded))
        out = []
        for b, enc in enumerate(encoded):
            s = cls.__new__(cls)
            text, pair = texts[b] if texts else ("", None)
            s._setup(lm, enc, text, pair, options, recording, b)
            out.append(s)
        return out

    @classmethod
    def batch(cls, lm: LoadedModel, texts: list[str | tuple[str, str | None]], *, max_tokens: int | None = None,
              options: dict | None = None) -> list["Session"]:
        """Sessions of several texts (or pairs) recorded in one right-padded forward pass."""
        limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
        pairs = [(t, None) if isinstance(t, str) else (t[0], t[1]) for t in texts]
        encoded = [encode(lm.tokenizer, t, p, max_length=limit, decoder=lm.spec.causal) for t, p in pairs]
        return cls.from_encoded(lm, encoded, pairs, options)

    # ---- what is known without computing
    @property
    def tokens(self) -> list[str]:
        return self.encoded.tokens

    @property
    def labels(self) -> list[str]:
        return self.encoded.labels

    @property
    def n_tokens(self) -> int:
        return len(self.encoded.ids)

    @property
    def forward_passes(self) -> int:
        """How many forward passes this session's recording ran (0 before the first map that needs one, then 1)."""
        return self._recording.passes

    @property
    def request(self) -> Request:
        return request_for(self.lm, self.n_tokens)

    def computed(self) -> list[str]:
        return list(self._arrays)

    def refusal(self, key: str) -> str | None:
        """Why ``key`` would be refused for this text (applicability, cost), or None; runs nothing."""
        try:
            registry.check(self.request, key, self.options)
        except (TooCostlyError, NotApplicableError) as exc:
            return str(exc)
        return None

    def layers(self) -> list[LayerDecomposition]:
        """Per-layer views of the records (each on its layer's device); records on first call."""
        with self._lock:
            if self._views is None:
                lm = self.lm
                chunk = int(self.options.get("chunk_bytes", CHUNK_BYTES))
                workspace = Workspace()
                views = []
                for i, rec in enumerate(self._recording.records(self._index)):
                    params = lm.layer_params(i)
                    views.append(LayerDecomposition(rec.to(params.w_out.device), params, index=i, chunk_bytes=chunk,
                                                    workspace=workspace))
                self._views = views
            return self._views

    # ---- predictions (normviz.attribution: they ride the one recorded pass)
    def predict(self, top: int = 10, position: int = -1):
        """The ``top`` most probable next tokens at ``position``: list of .token, .id, .prob, .logit."""
        from .attribution import predict
        return predict(self, top, position)

    def explain(self, token=None, foil=None, position: int = -1):
        """Why ``token`` (None: the top prediction) rather than ``foil`` at ``position``: an Explanation."""
        from .attribution import explain
        return explain(self, token, foil, position)

    def logit_lens(self, position: int = -1):
        """[L+1, V] log-probabilities of each layer's residual state at ``position`` through the readout."""
        from .attribution import logit_lens
        return logit_lens(self, position)

    # ---- maps
    def get(self, keys: Iterable[str] | str | None = None, *, strict: bool = True,
            progress: Progress | None = None) -> Analysis:
        """The maps ``keys`` (map keys, family names, ``"all"``; None: every default key) as an Analysis.

        Computes only keys not computed before. Each key is checked before anything runs; ``strict``:
        raise the first refusal (TooCostlyError, NotApplicableError); otherwise refused keys (and the keys
        that need them) are left out and listed in ``Analysis.refused``. ``Analysis.waited_s``: the seconds
        this call waited for other requests (another thread's get() of this session, which computes the maps
        both need once; a heavy-methods worker busy with another visitor's job), said in ``progress`` too."""
        self._waits.s = 0.0
        if not self._lock.acquire(blocking=False):
            if progress:
                progress(0.0, "waiting for another visitor's analysis of this same text (its maps are shared)")
            t0 = time.perf_counter()
            self._lock.acquire()
            self.add_wait(time.perf_counter() - t0)
        try:
            return self._get(keys, strict, progress)
        finally:
            self._lock.release()

    def _get(self, keys, strict: bool, progress: Progress | None) -> Analysis:
        wanted = resolve_keys(self.lm, keys)
        refused: dict[str, NormvizError] = {}
        request = self.request
        for k in wanted:
            if k in self._arrays or _refuse_dependent(k, refused):
                continue
            try:
                registry.check(request, k, self.options)
            except (TooCostlyError, NotApplicableError) as exc:
                refused[k] = exc
        if strict and refused:
            raise next(iter(refused.values()))
        todo = [k for k in wanted if k not in self._arrays and k not in refused]
        if todo:
            self._compute(todo, refused, strict, progress)
        keep = [k for k in wanted if k in self._arrays]
        enc = self.encoded
        lm = self.lm
        return Analysis(
            model_name=lm.name, model_type=lm.model_type, placement=lm.spec.placement, causal=lm.spec.causal,
            tokens=enc.tokens, labels=enc.labels, token_ids=enc.ids, special=np.array(enc.special, dtype=bool),
            arrays={k: self._arrays[k] for k in keep}, n_layers=lm.n_layers, n_heads=lm.n_heads,
            dtype=str(lm.dtype).replace("torch.", ""), device=str(lm.device), text=self.text,
            text_pair=self.text_pair, dropped=enc.dropped,
            notes={**({"pair": enc.note} if enc.note else {}),
                   **{k: self._notes[k] for k in keep if k in self._notes}},
            refused={k: str(refused[k]) for k in wanted if k in refused},
            waited_s=self._waits.s,
        )

    def _free_siblings(self, family, ks: list[str]) -> list[str]:
        """A family that declares COMPUTED_TOGETHER computes its other keys in the same pass at little extra
        cost (the norm family's stages share the Grams, the FF stages the per-pair vectors): they are kept,
        so asking for them later computes nothing. Option ``compute_together=False`` (the corpus engine, which
        knows what it needs) computes only the keys asked for."""
        if not getattr(family, "COMPUTED_TOGETHER", False) or not self.options.get("compute_together", True):
            return []
        out = []
        for info in family.KEYS:
            k = info.key
            if k in ks or k in self._arrays or registry.is_opt_in(k) or self.refusal(k) is not None:
                continue
            out.append(k)
        return out

    def _compute(self, todo: list[str], refused: dict, strict: bool, progress: Progress | None) -> None:
        order = list(registry.families())
        steps = len({registry.family_of(k).NAME for k in todo})
        done_steps = 0

        def report(fraction: float, message: str) -> None:
            if progress:
                progress(min(1.0, (done_steps + fraction) / max(steps, 1)), message)

        def layer_views():
            if self._views is None and progress:
                progress(done_steps / max(steps, 1), "forward pass")
            return self.layers()

        pending = list(todo)
        while pending:
            ready = [k for k in pending if all(r in self._arrays for r in registry.requires(k))]
            if not ready:
                raise RuntimeError(f"map keys {pending} wait on keys that were not computed")
            groups: dict[str, list[str]] = {}
            for k in sorted(ready, key=lambda k: order.index(registry.family_of(k).NAME)):
                groups.setdefault(registry.family_of(k).NAME, []).append(k)
            for name, ks in groups.items():
                family = registry.families()[name]
                ks = ks + self._free_siblings(family, ks)
                inputs = Inputs(request=self.request, layer_views=layer_views, arrays=dict(self._arrays),
                                model=self.lm if getattr(family, "NEEDS_MODEL", False) else None,
                                progress=report)
                try:
                    out = self._run_family(family, inputs, ks, report)
                except NormvizError as exc:
                    if strict:
                        raise
                    refused.update({k: exc for k in ks})
                    out = None
                if out is not None:
                    missing = [k for k in ks if k not in out.arrays]
                    if missing:
                        raise RuntimeError(f"family {name} did not return {missing}")
                    self._arrays.update({k: out.arrays[k] for k in ks})
                    self._notes.update({k: v for k, v in out.notes.items() if k in ks})
                done_steps += 1
            for k in pending:  # keys whose requirement failed are refused too
                if k not in refused:
                    _refuse_dependent(k, refused)
            pending = [k for k in pending if k not in self._arrays and k not in refused]
        if self._views is not None:
            for v in self._views:
                v.clear()


    def _run_family(self, family, inputs: Inputs, ks: list[str], report: Progress):
        """One family's keys: in the heavy-methods worker when the session has one that takes them
        (:mod:`normviz.workers`), else here. A family that reruns the shared model with hooks that do not
        keep to their own thread (no ``HOOKS_OWN_THREAD``) holds the model's lock meanwhile."""
        if self.worker is not None and self.worker.takes(self, family, ks):
            return self.worker.compute(self, family, ks, report)
        if inputs.model is not None and not getattr(family, "HOOKS_OWN_THREAD", False):
            with model_lock(self.lm.model):
                return family.compute(inputs, ks, self.options)
        return family.compute(inputs, ks, self.options)


def _refuse_dependent(key: str, refused: dict) -> bool:
    """Refuse ``key`` (in place) when a key it requires was refused; True if so."""
    blocked = next((r for r in registry.requires(key) if r in refused), None)
    if blocked is None:
        return False
    refused[key] = type(refused[blocked])(f"needs {blocked!r}: {refused[blocked]}")
    return True


def analyze(lm: LoadedModel, text: str, text_pair: str | None = None, keys: Iterable[str] | None = None,
            max_tokens: int | None = None, options: dict | None = None, progress: Progress | None = None,
            *, methods: Iterable[str] | None = None, target: str | None = None) -> Analysis:
    """``Session(lm, text, text_pair, max_tokens=…, options=…).get(keys)``: one text's maps.

    ``keys``: map keys (``"norm"``, ``"attn_res_ln"`` …) or None for every default map of this model
    (``methods=`` is the older name of the same argument). ``target``: encoder–decoders only (None: generated)."""
    extra = {"target": target} if target is not None else {}
    return Session(lm, text, text_pair, max_tokens=max_tokens, options=options, **extra).get(
        keys if keys is not None else methods, progress=progress)


def analyze_batch(lm: LoadedModel, texts: list[str | tuple[str, str | None]], keys: Iterable[str] | None = None,
                  max_tokens: int | None = None, options: dict | None = None, *,
                  methods: Iterable[str] | None = None) -> list[Analysis]:
    """Several texts with one forward pass (right-padded; padding never enters a map)."""
    keys = keys if keys is not None else methods
    return [s.get(keys) for s in Session.batch(lm, texts, max_tokens=max_tokens, options=options)]


__all__ = ["Session", "analyze", "analyze_batch", "request_for", "resolve_keys"]

"""``Session(lm, text)``: one input, recorded once; ``session.get(keys)`` computes only what is missing.

    text ─ tokenise ─► Session ─ first get() that needs records ─► one forward pass (records kept)
                                 get(keys) ─► each family's check (before the pass) ─► compute ─► Analysis

One class for every model kind. A model is a set of stacks (:class:`normviz.methods.keyspace.Stack`): a self-attention
model's one stack, or an encoder–decoder's encoder, decoder and cross blocks (``Session(lm, source,
target=…)``; the target is generated greedily when None). The one recording pass records every stack
(:mod:`normviz.record.recording`); a key is (stack, map key), spelled ``norm``, ``encoder_norm``, ``cross_norm`` …;
resolution, checks, memoisation, refusals, waits and the heavy-maps worker are the same for every stack.

The records are the cache (like TransformerLens' ``ActivationCache``): asking for more map keys later
never reruns the model, and keys computed once are memoised. Several texts recorded in one padded
forward pass are a batch of sessions (:meth:`Session.batch`), which the corpus engine uses too.

Delegated: the families' runs (:mod:`normviz.session.schedule`), the memory budget (:mod:`normviz.session.map_budget`),
one layer
at a time (:mod:`normviz.session.layer_maps`), predictions (:mod:`normviz.attribution`).
"""

from __future__ import annotations

import threading
import time
from typing import Iterable

import numpy as np

from ..core import memory, settings
from ..core.analysis import Analysis, Target, TokenAxis
from ..core.errors import NormvizError, UnsupportedModelError
from ..core.tokens import Encoded, encode
from ..methods import keyspace
from ..methods.base import Request
from ..models.floor import require_row
from ..models.loading import LoadedModel
from ..record.decompose import CHUNK_BYTES
from ..record.encdec import target as seq2seq
from ..record.recording import Part, Recording
from . import layer_maps, map_budget, schedule
from .schedule import Progress
from .store import MapStore


def resolve_keys(lm: LoadedModel, keys: Iterable[str] | None) -> list[str]:
    """Map keys (or family names, or ``"all"``) → the keys to compute, each after the keys it requires.
    ``None``: every default (not opt-in) key of this model (:func:`normviz.methods.keyspace.resolve`)."""
    return keyspace.resolve(lm, keys)


def request_for(lm: LoadedModel, n_tokens: int, stack: str | None = None) -> Request:
    return keyspace.request_for(lm, n_tokens, stack)


class Session:
    """One input of one model: tokenised now, recorded on first need, maps on demand.

    Self-attention models: one text, or a sentence pair — the model's real pair input: encoders get the
    tokenizer's segment ids (``token_type_ids``) in the recording pass; decoders get the two texts joined by a
    separator token (see :mod:`normviz.core.tokens`). How it was encoded is ``Analysis.notes["pair"]``.
    Encoder–decoders: a source text and ``target`` (None: generated greedily, capped by ``max_new_tokens`` or
    option ``max_new_tokens``: 2 × source tokens + 10, at most 256); ``Analysis.notes["target"]`` says which.

    ``max_tokens`` (default: the model's window) truncates with a TruncationWarning. ``options`` go to every
    family (e.g. ``rollout_normalization``, ``feedforward_budget_s``, ``flow_max_tokens``, ``chunk_bytes``);
    ``stop_early`` (default True): a ``get()`` of families that read only the attention blocks (``RECORD =
    "attention"``: the attention weights, the norm family) stops the recording pass after the last layer's
    attention block; anything needing the rest later records again, fully (False: always one full pass).
    ``worker``: a :class:`normviz.workers.process.HeavyWorker` that computes the costly families in another process
    (the app's server gives one, so that one visitor's heavy maps do not slow down another's short request).
    ``recorded``: a :class:`normviz.record.recording.Part` already tokenised (and maybe recorded with others:
    :meth:`batch`, :meth:`from_encoded`, :meth:`from_ids` give it)."""

    def __init__(
        self,
        lm: LoadedModel,
        text: str = "",
        text_pair: str | None = None,
        *,
        target: str | None = None,
        max_tokens: int | None = None,
        max_new_tokens: int | None = None,
        options: dict | None = None,
        worker=None,
        recorded: Part | None = None,
    ):
        self.lm, self.options = lm, settings.check_options(options)  # unknown or ill-typed: refused here
        if recorded is None:
            recorded = _tokenised(lm, text, text_pair, target, max_tokens, max_new_tokens, self.options)
        self.part = recorded
        self.text = text
        self.text_pair = text_pair if text_pair and str(text_pair).strip() and not lm.is_encoder_decoder else None
        self.stacks = keyspace.stacks_of(lm)
        self._stack = {
            s: keyspace.Stack(lm, s, len(self.axis(s).ids), len(self.encoded.ids) if s == "cross" else None)
            for s in self.stacks
        }
        # the maps, notes, views, layer-map cache and lock: one object, handed to the session's jobs
        self.store = MapStore(memory.LayerCache(float(self.options.get("map_cache_mb", memory.MAP_CACHE_MB))))
        self._waits = threading.local()  # seconds the current get() of each thread waited for other requests
        self.worker = worker
        if worker is not None:
            worker.prepare(self)

    # ---- constructors for inputs tokenised elsewhere
    @classmethod
    def from_encoded(
        cls,
        lm: LoadedModel,
        encoded: list[Encoded],
        texts: list[tuple[str, str | None]] | None = None,
        options: dict | None = None,
    ) -> list["Session"]:
        """Sessions of already tokenised sequences that share one recording pass (self-attention models)."""
        if lm.is_encoder_decoder:
            raise UnsupportedModelError(
                f"{lm.name!r} is an encoder–decoder: analyse one source and target at a "
                "time with Session(lm, source, target=…)."
            )
        parts = Recording.text_batch(lm, list(encoded), (options or {}).get("record_attention", "auto"))
        return [
            cls(lm, *(texts[b] if texts else ("", None)), options=options, recorded=part)
            for b, part in enumerate(parts)
        ]

    @classmethod
    def batch(
        cls,
        lm: LoadedModel,
        texts: list[str | tuple[str, str | None]],
        *,
        max_tokens: int | None = None,
        options: dict | None = None,
    ) -> list["Session"]:
        """Sessions of several texts (or pairs) recorded in one right-padded forward pass."""
        if lm.is_encoder_decoder:
            return cls.from_encoded(lm, [], options=options)  # refused there, with the message
        limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
        pairs = [(t, None) if isinstance(t, str) else (t[0], t[1]) for t in texts]
        encoded = [encode(lm.tokenizer, t, p, max_length=limit, decoder=lm.spec.causal) for t, p in pairs]
        return cls.from_encoded(lm, encoded, pairs, options)

    @classmethod
    def from_inputs(
        cls, lm: LoadedModel, inputs, text: str = "", text_pair: str | None = None, options: dict | None = None
    ) -> "Session":
        """A session of what :attr:`inputs` gave (another process's session: :mod:`normviz.workers.process`)."""
        if isinstance(inputs, Encoded):
            return cls.from_encoded(lm, [inputs], [(text, text_pair)], options)[0]
        return cls(lm, text, options=options, recorded=Recording.seq2seq(lm, inputs))

    @classmethod
    def from_ids(
        cls,
        lm: LoadedModel,
        src_ids: list[int],
        tgt_ids: list[int],
        out_ids: list[int] | None = None,
        options: dict | None = None,
    ) -> "Session":
        """An encoder–decoder session of given ids (:func:`normviz.record.encdec.target.from_ids`)."""
        return cls(lm, options=options, recorded=Recording.seq2seq(lm, seq2seq.from_ids(lm, src_ids, tgt_ids, out_ids)))

    # ---- what is known without computing
    @property
    def inputs(self):
        """What rebuilds this session's tokens elsewhere (picklable): the text's :class:`Encoded`, or an
        encoder–decoder's :class:`~normviz.record.encdec.target.Seq2SeqInputs` (:meth:`from_inputs`)."""
        return self.part.seq2seq if self.part.seq2seq is not None else self.encoded

    def axis(self, stack: str) -> Encoded:
        """The tokens of ``stack``'s rows (the cross stack's rows are the decoder's, its columns the encoder's)."""
        return self.part.axes["decoder" if stack == "cross" else stack]

    @property
    def encoded(self) -> Encoded:
        """The first stack's tokens: the text's, or an encoder–decoder's source."""
        return self.part.axes[self.stacks[0]]

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
    def is_encoder_decoder(self) -> bool:
        return self.part.seq2seq is not None

    @property
    def target_text(self) -> str | None:
        return self.part.seq2seq.text if self.part.seq2seq is not None else None

    @property
    def src_tokens(self) -> list[str] | None:
        return self.encoded.tokens if self.is_encoder_decoder else None

    @property
    def tgt_tokens(self) -> list[str] | None:
        return self.part.axes["decoder"].tokens if self.is_encoder_decoder else None

    @property
    def forward_passes(self) -> int:
        """How many forward passes this session's recording ran (0 before the first map that needs one, then 1)."""
        return self.part.passes

    def stack(self, name: str) -> keyspace.Stack:
        """The :class:`~normviz.methods.keyspace.Stack` ``name`` of this input (its spelling, model view, rows,
        request)."""
        return self._stack[name]

    def request_of(self, stack: str) -> Request:
        """What ``stack``'s families know before the forward pass (its rows' count), built once per stack; a stack
        this model lacks gives the first stack's (whose check then refuses the key with the reason)."""
        return self._stack.get(stack, self._stack[self.stacks[0]]).request

    @property
    def request(self) -> Request:
        return self.request_of(self.stacks[0])

    def computed(self) -> list[str]:
        return list(self.store.arrays)

    def refusal(self, key: str) -> str | None:
        """Why ``key`` (or a key it needs) would be refused for this input (applicability, cost), or None;
        runs nothing."""
        stack, _ = keyspace.parse(key)
        request = self.request_of(stack) if stack in self.stacks else None
        return keyspace.refusal(self.lm, key, request, self.options)

    def records(self):
        """The recording pass's own record (records on first call): [LayerRecord per layer] of a
        self-attention model, the :class:`~normviz.record.encdec.record.Seq2SeqRecord` of an encoder–decoder."""
        return self.part.raw()

    def layers(self, stack: str | None = None, full: bool = True, alpha: bool = False, ff: int = 0) -> list:
        """Per-layer views of ``stack``'s records (default: the first stack), each on its layer's device:
        :class:`LayerDecomposition` (self-attention stacks), :class:`CrossDecomposition` (cross); records
        on first call. ``full=False``: the last layer's record may end after its attention block (a pass
        stopped there, :class:`normviz.record.recording.Recording`); with ``full`` such a recording is made again,
        fully, and the views follow it. ``alpha``: the caller keeps every layer's α (the ``attention`` map): a
        long input recorded now records α itself where it can (:meth:`normviz.record.recording.Recording.records`);
        ``ff``: the caller is explain: a pass recorded now keeps up to that many bytes of FF pre-activations for its
        backward pass."""
        stack = stack or self.stacks[0]
        with self.store.lock:
            records = self.part.records(stack, full, alpha, ff)
            if stack not in self.store.views or records is not self.store.views_of.get(stack):
                self.store.views_of[stack] = records
                self.store.views[stack] = self.stack(stack).layer_views(
                    records, int(self.options.get("chunk_bytes", CHUNK_BYTES))
                )
            return self.store.views[stack]

    def add_wait(self, seconds: float) -> None:
        """Count ``seconds`` as waited for another request in the current get() (:mod:`normviz.workers.process`)."""
        self._waits.s = getattr(self._waits, "s", 0.0) + float(seconds)

    # ---- predictions (normviz.attribution: they ride the one recorded pass)
    def predict(self, top: int = 10, position: int = -1):
        """The ``top`` most probable next tokens at ``position``: list of .token, .id, .prob, .logit."""
        from ..attribution import predict

        return predict(self, top, position)

    def explain(self, token=None, foil=None, position: int = -1):
        """Why ``token`` (None: the top prediction) rather than ``foil`` at ``position``: an Explanation
        (encoder–decoders: after decoder row ``position``, sources over source + target tokens)."""
        require_row(self.lm, "explain")  # the raw-attention floor: needs an architecture row
        if self.is_encoder_decoder:
            from ..attribution.seq2seq import explain as explain_seq2seq

            with self.store.lock:
                return explain_seq2seq(self, token, foil, position)
        from ..attribution import explain

        return explain(self, token, foil, position)

    def explain_continuation(
        self, max_new_tokens: int | None = None, continuation=None, foil=None, by_layer: bool = False
    ):
        """Every step of a continuation explained (greedy, or ``continuation`` teacher-forced): a
        :class:`normviz.attribution.continuation.Continuation` (rows = steps, columns = earlier tokens)."""
        from ..attribution.continuation import explain_continuation

        return explain_continuation(self, max_new_tokens, continuation, foil, by_layer)

    def logit_lens(self, position: int = -1):
        """[L+1, V] log-probabilities of each layer's residual state at ``position`` through the readout."""
        from ..attribution import logit_lens

        return logit_lens(self, position)

    # ---- ground truth by intervention (normviz.attribution.knockout: the model's own pass, batched)
    def knockout(self, token=None, foil=None, position: int = -1):
        """Attention knockout: ``.delta`` [n], the logit (difference) lost when every attention edge out of
        token j into other positions is blocked in every layer and head."""
        require_row(self.lm, "knockout")  # the raw-attention floor: needs an architecture row
        from ..attribution.knockout import knockout

        return knockout(self, token, foil, position)

    def ablate_heads(self, token=None, foil=None, position: int = -1, means=None):
        """Head ablation: ``.delta`` [L, H], the logit (difference) lost when head (l, h)'s output before W^O is
        zeroed at every position (``means`` [L, H, d_head]: replaced by its corpus mean instead)."""
        require_row(self.lm, "ablate_heads")  # the raw-attention floor: needs an architecture row
        from ..attribution.knockout import ablate_heads

        return ablate_heads(self, token, foil, position, means)

    def atp(self, token=None, foil=None, position: int = -1, ablation: str = "zero", means=None, qk_fix: bool = False):
        """Attribution patching: ``.delta`` [L, H], the first-order estimate of :meth:`ablate_heads` from one
        forward and one backward pass; ``qk_fix``: AtP*'s exact softmax for later heads' patterns
        (:mod:`normviz.attribution.atp`)."""
        from ..attribution.atp import atp

        return atp(self, token, foil, position, ablation, means, qk_fix)

    def eap_ig(self, token=None, foil=None, position: int = -1, ablation: str = "zero", means=None, steps: int = 16):
        """EAP-IG's head scores: ``.delta`` [L, H], integrated gradients from every head ablated to none, and
        ``.gap``, (total − all ablated) − Σ delta (:func:`normviz.attribution.atp.eap_ig`)."""
        from ..attribution.atp import eap_ig

        return eap_ig(self, token, foil, position, ablation, means, steps)

    def attend(self, layer: int, head: int, query: int = -1, key: int = 0, by_token: bool = False):
        """Head ``head`` of ``layer``: its score of ``query`` → ``key`` split exactly over what wrote both
        residual states (:func:`normviz.attribution.qk.attend`)."""
        require_row(self.lm, "attend")  # the raw-attention floor: needs an architecture row
        from ..attribution.qk import attend

        return attend(self, layer, head, query, key, by_token)

    # ---- maps
    def get(
        self, keys: Iterable[str] | str | None = None, *, strict: bool = True, progress: Progress | None = None
    ) -> Analysis:
        """The maps ``keys`` (map keys, family names, ``"all"``; None: every default key) as an Analysis.

        Computes only keys not computed before. Each key is checked before anything runs; ``strict``:
        raise the first refusal (TooCostlyError, NotApplicableError); otherwise refused keys (and the keys
        that need them) are left out and listed in ``Analysis.refused``. ``Analysis.waited_s``: the seconds
        this call waited for other requests (another thread's get() of this session, which computes the maps
        both need once; a heavy-methods worker busy with another visitor's job), said in ``progress`` too."""
        self._waits.s = 0.0
        if not self.store.lock.acquire(blocking=False):
            if progress:
                progress(0.0, "waiting for another visitor's analysis of this same text (its maps are shared)")
            t0 = time.perf_counter()
            self.store.lock.acquire()
            self.add_wait(time.perf_counter() - t0)
        try:
            return self._get(keys, strict, progress)
        finally:
            self.store.lock.release()

    def _get(self, keys, strict: bool, progress: Progress | None) -> Analysis:
        wanted = keyspace.resolve(self.lm, keys)
        todo, refused = schedule.plan(self, wanted, strict)
        if todo:
            schedule.compute(self, todo, refused, strict, progress)
        return self._analysis(wanted, refused)

    def _analysis(self, wanted: list[str], refused: dict) -> Analysis:
        keep = [k for k in wanted if k in self.store.arrays]
        views = {k: v for k in keep if (v := keyspace.layer_view(k)) is not None}
        enc, lm, part = self.encoded, self.lm, self.part
        target = None
        if part.seq2seq is not None:
            rec = part.raw(record=False)
            target = Target(
                fed=_axis(part.seq2seq.target),
                predicts=_axis(part.seq2seq.labels),
                text=part.seq2seq.text,
                predicted_ids=rec.predicted if rec is not None else None,
            )
        return Analysis(
            model_name=lm.name,
            model_type=lm.model_type,
            placement=lm.spec.placement,
            causal=lm.spec.causal and target is None,
            tokens=enc.tokens,
            labels=enc.labels,
            token_ids=enc.ids,
            special=np.array(enc.special, dtype=bool),
            arrays={k: self.store.arrays[k] for k in keep},
            n_layers=lm.n_layers,
            n_heads=lm.n_heads,
            dtype=str(lm.dtype).replace("torch.", ""),
            device=str(lm.device),
            text=self.text,
            text_pair=self.text_pair,
            dropped=enc.dropped,
            notes={**part.notes, **{k: self.store.notes[k] for k in keep if k in self.store.notes}},
            refused={k: str(refused[k]) for k in wanted if k in refused},
            all_heads=views,
            views={v: self.store.arrays[v] for v in views.values() if v in self.store.arrays and v not in keep},
            waited_s=self._waits.s,
            target=target,
        )

    # ---- memory (normviz.session.map_budget)
    def array_shape(self, key: str) -> tuple[int, ...]:
        """The shape of ``key``'s whole array for this input, known before computing: [L, H, rows, cols] for
        per-head keys, else [L, rows, cols] (rows: the stack's tokens; cross keys: columns the encoder's)."""
        return map_budget.array_shape(self, key)

    @property
    def itemsize(self) -> int:
        """Bytes per map value: the working dtype's (float32 for half-precision models)."""
        return map_budget.itemsize(self.lm)

    def held_bytes(self) -> int:
        """What this session's whole arrays hold now."""
        return map_budget.held_bytes(self)

    # ---- one layer at a time (normviz.session.layer_maps)
    def map(self, key: str, layer: int, head: int | None = None) -> np.ndarray:
        """One [rows, cols] map of one layer, computing only what that layer needs (as ``Analysis.map``:
        ``head=None`` is the layer view, :func:`normviz.methods.keyspace.layer_view` — ``norm_layer`` for ``norm``, the
        head mean otherwise).

        Per-layer families (``PER_LAYER``: attention weights, the norm family, the FF maps) compute the one
        layer from its records (a long input's α recomputed from q, k) and keep it in a bounded cache
        (option ``map_cache_mb``, default 512); a key whose array is already computed is read from it; a
        cross-layer key (rollouts, flow …) is computed whole through :meth:`get` (its own checks apply)."""
        return self.maps([key], layer, head)[key]

    def maps(self, keys: Iterable[str], layer: int, head: int | None = None) -> dict[str, np.ndarray]:
        """{key: :meth:`map` (key, layer, head)} of several keys, their per-layer parts computed in one pass
        over that layer's records: α, the head vectors and the norm scales are computed once for all of them
        (a long input's layer change on Explore shows four maps of one layer). A derived [rows, cols] view (a
        head mean, one head of a layer too big to keep whole) is kept in the same bounded cache. Raises the
        first refusal (cost checks run for one layer before anything is computed)."""
        return layer_maps.maps(self, keys, layer, head)

    def layer_stack(self, key: str, layer: int) -> np.ndarray:
        """Every head of one layer of ``key`` at once: [H, rows, cols] for per-head keys, [1, rows, cols] for
        layer-level ones — layer ``layer`` of the whole array, the same numbers, without making the whole
        array. Per-layer families compute that layer alone (its [H, n, n] once for all heads, kept in the
        bounded layer cache when it fits); a key already computed whole is read from it; other keys (cross-layer
        maps, and the families a worker process computes) come whole through :meth:`get`."""
        return layer_maps.layer_stack(self, key, layer)


def _axis(enc: Encoded) -> TokenAxis:
    return TokenAxis(tokens=enc.tokens, labels=enc.labels, ids=enc.ids, special=np.array(enc.special, dtype=bool))


def _tokenised(lm, text, text_pair, target, max_tokens, max_new_tokens, options) -> Part:
    """The input's part (not recorded yet): the text (pair) of a self-attention model, or an encoder–decoder's
    source and target."""
    if lm.is_encoder_decoder:
        return Recording.seq2seq(lm, seq2seq.prepare(lm, text, text_pair, target, max_tokens, max_new_tokens, options))
    if target is not None:
        raise NormvizError(f"target= is for encoder–decoder models; {lm.name!r} is not one.")
    limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
    enc = encode(lm.tokenizer, text, text_pair, max_length=limit, decoder=lm.spec.causal)
    return Recording.text_batch(lm, [enc], options.get("record_attention", "auto"))[0]


def analyze(
    lm: LoadedModel,
    text: str,
    text_pair: str | None = None,
    keys: Iterable[str] | None = None,
    max_tokens: int | None = None,
    options: dict | None = None,
    progress: Progress | None = None,
    *,
    methods: Iterable[str] | None = None,
    target: str | None = None,
) -> Analysis:
    """``Session(lm, text, text_pair, max_tokens=…, options=…).get(keys)``: one text's maps.

    ``keys``: map keys (``"norm"``, ``"attn_res_ln"`` …) or None for every default map of this model
    (``methods=`` is the older name of the same argument). ``target``: encoder–decoders only (None: generated)."""
    return Session(lm, text, text_pair, max_tokens=max_tokens, options=options, target=target).get(
        keys if keys is not None else methods, progress=progress
    )


def analyze_batch(
    lm: LoadedModel,
    texts: list[str | tuple[str, str | None]],
    keys: Iterable[str] | None = None,
    max_tokens: int | None = None,
    options: dict | None = None,
    *,
    methods: Iterable[str] | None = None,
) -> list[Analysis]:
    """Several texts with one forward pass (right-padded; padding never enters a map)."""
    keys = keys if keys is not None else methods
    return [s.get(keys) for s in Session.batch(lm, texts, max_tokens=max_tokens, options=options)]


__all__ = ["Session", "analyze", "analyze_batch", "request_for", "resolve_keys"]

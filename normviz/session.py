"""``Session(lm, text)``: one input, recorded once; ``session.get(keys)`` computes only what is missing.

    text ─ tokenise ─► Session ─ first get() that needs records ─► one forward pass (records kept)
                                 get(keys) ─► each family's check (before the pass) ─► compute ─► Analysis

One class for every model kind. A model is a set of stacks (:mod:`normviz.keyspace`): a self-attention
model's one stack, or an encoder–decoder's encoder, decoder and cross blocks (``Session(lm, source,
target=…)``; the target is generated greedily when None). The one recording pass records every stack
(:mod:`normviz.recording`); a key is (stack, map key), spelled ``norm``, ``encoder_norm``, ``cross_norm`` …;
resolution, checks, memoisation, refusals, waits and the heavy-maps worker are the same for every stack.

The records are the cache (like TransformerLens' ``ActivationCache``): asking for more map keys later
never reruns the model, and keys computed once are memoised. Several texts recorded in one padded
forward pass are a batch of sessions (:meth:`Session.batch`), which the corpus engine uses too.
"""
from __future__ import annotations

import functools
import threading
import time
from typing import Callable, Iterable

import numpy as np

from . import keyspace, memory, settings
from . import methods as registry
from .analysis import Analysis, Target, TokenAxis
from .decompose import CHUNK_BYTES, LayerDecomposition, Workspace, working_dtype
from .encdec import target as seq2seq
from .encdec.params import cross_params
from .errors import NormvizError, NotApplicableError, TooCostlyError, UnsupportedModelError
from .methods.base import Inputs, Request, to_numpy
from .methods.cross import CrossDecomposition
from .models.loading import LoadedModel
from .record import model_lock
from .recording import Part, Recording
from .tokens import Encoded, encode

Progress = Callable[[float, str], None]


def resolve_keys(lm: LoadedModel, keys: Iterable[str] | None) -> list[str]:
    """Map keys (or family names, or ``"all"``) → the keys to compute, each after the keys it requires.
    ``None``: every default (not opt-in) key of this model (:func:`normviz.keyspace.resolve`)."""
    return keyspace.resolve(lm, keys)


def request_for(lm: LoadedModel, n_tokens: int, stack: str | None = None) -> Request:
    return keyspace.request_for(lm, n_tokens, stack)


class Session:
    """One input of one model: tokenised now, recorded on first need, maps on demand.

    Self-attention models: one text, or a sentence pair — the model's real pair input: encoders get the
    tokenizer's segment ids (``token_type_ids``) in the recording pass; decoders get the two texts joined by a
    separator token (see :mod:`normviz.tokens`). How it was encoded is ``Analysis.notes["pair"]``.
    Encoder–decoders: a source text and ``target`` (None: generated greedily, capped by ``max_new_tokens`` or
    option ``max_new_tokens``: 2 × source tokens + 10, at most 256); ``Analysis.notes["target"]`` says which.

    ``max_tokens`` (default: the model's window) truncates with a TruncationWarning. ``options`` go to every
    family (e.g. ``rollout_normalization``, ``feedforward_budget_s``, ``flow_max_tokens``, ``chunk_bytes``);
    ``stop_early`` (default True): a ``get()`` of families that read only the attention blocks (``RECORD =
    "attention"``: the attention weights, the norm family) stops the recording pass after the last layer's
    attention block; anything needing the rest later records again, fully (False: always one full pass).
    ``worker``: a :class:`normviz.workers.HeavyWorker` that computes the costly families in another process
    (the app's server gives one, so that one visitor's heavy maps do not slow down another's short request).
    ``recorded``: a :class:`normviz.recording.Part` already tokenised (and maybe recorded with others:
    :meth:`batch`, :meth:`from_encoded`, :meth:`from_ids` give it)."""

    def __init__(self, lm: LoadedModel, text: str = "", text_pair: str | None = None, *,
                 target: str | None = None, max_tokens: int | None = None, max_new_tokens: int | None = None,
                 options: dict | None = None, worker=None, recorded: Part | None = None):
        self.lm, self.options = lm, settings.check_options(options)  # unknown or ill-typed: refused here
        if recorded is None:
            recorded = _tokenised(lm, text, text_pair, target, max_tokens, max_new_tokens, self.options)
        self.part = recorded
        self.text = text
        self.text_pair = text_pair if text_pair and str(text_pair).strip() and not lm.is_encoder_decoder else None
        self.stacks = keyspace.stacks_of(lm)
        self._arrays: dict[str, np.ndarray] = {}  # spelled key -> its maps
        self._notes: dict[str, str] = {}
        self._lock = threading.RLock()
        self._views: dict[str, list] = {}
        self._views_of: dict[str, list] = {}  # stack -> the records its views were made from
        self._requests: dict[str, Request] = {}
        self._waits = threading.local()  # seconds the current get() of each thread waited for other requests
        self._layer_maps = memory.LayerCache(float(self.options.get("map_cache_mb", memory.MAP_CACHE_MB)))
        self.worker = worker
        if worker is not None:
            worker.prepare(self)

    # ---- constructors for inputs tokenised elsewhere
    @classmethod
    def from_encoded(cls, lm: LoadedModel, encoded: list[Encoded], texts: list[tuple[str, str | None]] | None = None,
                     options: dict | None = None) -> list["Session"]:
        """Sessions of already tokenised sequences that share one recording pass (self-attention models)."""
        if lm.is_encoder_decoder:
            raise UnsupportedModelError(f"{lm.name!r} is an encoder–decoder: analyse one source and target at a "
                                        "time with Session(lm, source, target=…).")
        parts = Recording.text_batch(lm, list(encoded), (options or {}).get("record_attention", "auto"))
        return [cls(lm, *(texts[b] if texts else ("", None)), options=options, recorded=part)
                for b, part in enumerate(parts)]

    @classmethod
    def batch(cls, lm: LoadedModel, texts: list[str | tuple[str, str | None]], *, max_tokens: int | None = None,
              options: dict | None = None) -> list["Session"]:
        """Sessions of several texts (or pairs) recorded in one right-padded forward pass."""
        if lm.is_encoder_decoder:
            return cls.from_encoded(lm, [], options=options)  # refused there, with the message
        limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
        pairs = [(t, None) if isinstance(t, str) else (t[0], t[1]) for t in texts]
        encoded = [encode(lm.tokenizer, t, p, max_length=limit, decoder=lm.spec.causal) for t, p in pairs]
        return cls.from_encoded(lm, encoded, pairs, options)

    @classmethod
    def from_inputs(cls, lm: LoadedModel, inputs, text: str = "", text_pair: str | None = None,
                    options: dict | None = None) -> "Session":
        """A session of what :attr:`inputs` gave (another process's session: :mod:`normviz.workers`)."""
        if isinstance(inputs, Encoded):
            return cls.from_encoded(lm, [inputs], [(text, text_pair)], options)[0]
        return cls(lm, text, options=options, recorded=Recording.seq2seq(lm, inputs))

    @classmethod
    def from_ids(cls, lm: LoadedModel, src_ids: list[int], tgt_ids: list[int], out_ids: list[int] | None = None,
                 options: dict | None = None) -> "Session":
        """An encoder–decoder session of given ids (:func:`normviz.encdec.target.from_ids`)."""
        return cls(lm, options=options, recorded=Recording.seq2seq(lm, seq2seq.from_ids(lm, src_ids, tgt_ids,
                                                                                        out_ids)))

    # ---- what is known without computing
    @property
    def inputs(self):
        """What rebuilds this session's tokens elsewhere (picklable): the text's :class:`Encoded`, or an
        encoder–decoder's :class:`~normviz.encdec.target.Seq2SeqInputs` (:meth:`from_inputs`)."""
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

    def request_of(self, stack: str) -> Request:
        """What ``stack``'s families know before the forward pass (its rows' count); built once per stack (a
        frozen Request: every check, shape and budget of a get() reads it, ~20 µs each to rebuild)."""
        request = self._requests.get(stack)
        if request is None:
            request = self._requests[stack] = keyspace.request_for(self.lm, len(self.axis(stack).ids), stack)
        return request

    @property
    def request(self) -> Request:
        return self.request_of(self.stacks[0])

    def computed(self) -> list[str]:
        return list(self._arrays)

    def _check(self, name: str) -> None:
        stack, key = keyspace.parse(name)
        request = self.request_of(stack) if stack in self.stacks else self.request
        keyspace.check(self.lm, stack, key, request, self.options)

    def refusal(self, key: str) -> str | None:
        """Why ``key`` (or a key it needs) would be refused for this input (applicability, cost), or None;
        runs nothing."""
        stack, _ = keyspace.parse(key)
        request = self.request_of(stack) if stack in self.stacks else None
        return keyspace.refusal(self.lm, key, request, self.options)

    def records(self):
        """The recording pass's own record (records on first call): [LayerRecord per layer] of a
        self-attention model, the :class:`~normviz.encdec.record.Seq2SeqRecord` of an encoder–decoder."""
        return self.part.raw()

    def layers(self, stack: str | None = None, full: bool = True) -> list:
        """Per-layer views of ``stack``'s records (default: the first stack), each on its layer's device:
        :class:`LayerDecomposition` (self-attention stacks), :class:`CrossDecomposition` (cross); records
        on first call. ``full=False``: the last layer's record may end after its attention block (a pass
        stopped there, :class:`normviz.recording.Recording`); with ``full`` such a recording is made again,
        fully, and the views follow it."""
        stack = stack or self.stacks[0]
        with self._lock:
            records = self.part.records(stack, full)
            if stack not in self._views or records is not self._views_of.get(stack):
                self._views_of[stack] = records
                view = keyspace.stack_model(self.lm, stack)
                if stack == "cross":
                    views = [CrossDecomposition(rec, cross_params(self.lm, i)) for i, rec in enumerate(records)]
                else:
                    chunk = int(self.options.get("chunk_bytes", CHUNK_BYTES))
                    workspace = Workspace()
                    views = []
                    for i, rec in enumerate(records):
                        params = view.layer_params(i)
                        views.append(LayerDecomposition(rec.to(params.w_out.device), params, index=i,
                                                        chunk_bytes=chunk, workspace=workspace))
                self._views[stack] = views
            return self._views[stack]

    def add_wait(self, seconds: float) -> None:
        """Count ``seconds`` as waited for another request in the current get() (:mod:`normviz.workers`)."""
        self._waits.s = getattr(self._waits, "s", 0.0) + float(seconds)

    # ---- predictions (normviz.attribution: they ride the one recorded pass)
    def predict(self, top: int = 10, position: int = -1):
        """The ``top`` most probable next tokens at ``position``: list of .token, .id, .prob, .logit."""
        from .attribution import predict
        return predict(self, top, position)

    def explain(self, token=None, foil=None, position: int = -1):
        """Why ``token`` (None: the top prediction) rather than ``foil`` at ``position``: an Explanation
        (encoder–decoders: after decoder row ``position``, sources over source + target tokens)."""
        if self.is_encoder_decoder:
            from .attribution.seq2seq import explain as explain_seq2seq
            with self._lock:
                return explain_seq2seq(self, token, foil, position)
        from .attribution import explain
        return explain(self, token, foil, position)

    def logit_lens(self, position: int = -1):
        """[L+1, V] log-probabilities of each layer's residual state at ``position`` through the readout."""
        from .attribution import logit_lens
        return logit_lens(self, position)

    # ---- ground truth by intervention (normviz.attribution.knockout: the model's own pass, batched)
    def knockout(self, token=None, foil=None, position: int = -1):
        """Attention knockout: ``.delta`` [n], the logit (difference) lost when every attention edge out of
        token j into other positions is blocked in every layer and head."""
        from .attribution.knockout import knockout
        return knockout(self, token, foil, position)

    def ablate_heads(self, token=None, foil=None, position: int = -1, means=None):
        """Head ablation: ``.delta`` [L, H], the logit (difference) lost when head (l, h)'s output before W^O is
        zeroed at every position (``means`` [L, H, d_head]: replaced by its corpus mean instead)."""
        from .attribution.knockout import ablate_heads
        return ablate_heads(self, token, foil, position, means)

    def attend(self, layer: int, head: int, query: int = -1, key: int = 0, by_token: bool = False):
        """Head ``head`` of ``layer``: its score of ``query`` → ``key`` split exactly over what wrote both
        residual states (:func:`normviz.attribution.qk.attend`)."""
        from .attribution.qk import attend
        return attend(self, layer, head, query, key, by_token)

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
        wanted = keyspace.resolve(self.lm, keys)
        refused: dict[str, NormvizError] = self._over_budget(wanted, strict)
        for k in wanted:
            if k in self._arrays or k in refused or _refuse_dependent(k, refused):
                continue
            try:
                self._check(k)
            except (TooCostlyError, NotApplicableError) as exc:
                refused[k] = exc
        if strict and refused:
            raise next(iter(refused.values()))
        todo = [k for k in wanted if k not in self._arrays and k not in refused]
        if todo:
            self._compute(todo, refused, strict, progress)
        return self._analysis(wanted, refused)

    def _analysis(self, wanted: list[str], refused: dict) -> Analysis:
        keep = [k for k in wanted if k in self._arrays]
        enc, lm, part = self.encoded, self.lm, self.part
        target = None
        if part.seq2seq is not None:
            rec = part.raw(record=False)
            target = Target(fed=_axis(part.seq2seq.target), predicts=_axis(part.seq2seq.labels),
                            text=part.seq2seq.text, predicted_ids=rec.predicted if rec is not None else None)
        return Analysis(
            model_name=lm.name, model_type=lm.model_type, placement=lm.spec.placement,
            causal=lm.spec.causal and target is None,
            tokens=enc.tokens, labels=enc.labels, token_ids=enc.ids, special=np.array(enc.special, dtype=bool),
            arrays={k: self._arrays[k] for k in keep}, n_layers=lm.n_layers, n_heads=lm.n_heads,
            dtype=str(lm.dtype).replace("torch.", ""), device=str(lm.device), text=self.text,
            text_pair=self.text_pair, dropped=enc.dropped,
            notes={**part.notes, **{k: self._notes[k] for k in keep if k in self._notes}},
            refused={k: str(refused[k]) for k in wanted if k in refused},
            waited_s=self._waits.s, target=target,
        )

    def _free_siblings(self, stack: str, family, ks: list[str]) -> list[str]:
        """A family that declares COMPUTED_TOGETHER computes its other keys in the same pass at little extra
        cost (the norm family's stages share the Grams, the FF stages the per-pair vectors): they are kept,
        so asking for them later computes nothing. Option ``compute_together=False`` (the corpus engine, which
        knows what it needs) computes only the keys asked for."""
        if not getattr(family, "COMPUTED_TOGETHER", False) or not self.options.get("compute_together", True):
            return []
        out = []
        for info in family.KEYS:
            k = keyspace.spell(stack, info.key)
            if (k in ks or k in self._arrays or stack not in info.stacks or registry.is_opt_in(info.key)
                    or self.refusal(k) is not None or self._over_budget(ks + out + [k], False)):
                continue
            out.append(k)
        return out

    # ---- memory
    def array_shape(self, key: str) -> tuple[int, ...]:
        """The shape of ``key``'s whole array for this input, known before computing: [L, H, rows, cols] for
        per-head keys, else [L, rows, cols] (rows: the stack's tokens; cross keys: columns the encoder's)."""
        stack, base = keyspace.parse(key)
        request = self.request_of(stack) if stack in self.stacks else self.request
        cols = self.n_tokens if stack == "cross" else request.n_tokens
        return memory.shape_of(registry.key_info(base).per_head, request.n_layers, request.n_heads,
                               request.n_tokens, cols)

    @property
    def itemsize(self) -> int:
        """Bytes per map value: the working dtype's (float32 for half-precision models)."""
        return _itemsize(working_dtype(self.lm.dtype))

    def held_bytes(self) -> int:
        """What this session's whole arrays hold now."""
        return sum(a.nbytes for a in self._arrays.values())

    def _over_budget(self, wanted: list[str], strict: bool) -> dict[str, NormvizError]:
        """Keys whose whole arrays would not fit the memory budget (with what the session holds): raised at
        once (``strict``) or refused one by one (the first that fit are kept), before anything runs."""
        budget = memory.budget_mb(self.options)
        todo = [k for k in dict.fromkeys(wanted) if k not in self._arrays]
        if budget is None or not todo:
            return {}
        shapes = {k: self.array_shape(k) for k in todo}
        sizes = {k: memory.nbytes(shapes[k], self.itemsize) for k in todo}
        held, limit = self.held_bytes(), budget * 2**20
        if held + sum(sizes.values()) <= limit:
            return {}
        n = self.request.n_tokens
        if strict:
            raise memory.over_budget_error(todo, sum(sizes.values()), held, budget, n, shapes)
        refused, used = {}, held
        for k in todo:
            if used + sizes[k] > limit:
                refused[k] = memory.over_budget_error([k], sizes[k], used, budget, n, shapes)
            else:
                used += sizes[k]
        return refused

    # ---- one layer at a time
    def map(self, key: str, layer: int, head: int | None = None) -> np.ndarray:
        """One [rows, cols] map of one layer, computing only what that layer needs (as ``Analysis.map``:
        ``head=None`` is the layer view — ``norm_layer`` for ``norm``, the head mean of α for ``attention``,
        the head mean otherwise).

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
        out: dict[str, np.ndarray] = {}
        todo: dict[str, tuple] = {}  # key -> (stack, base to compute, layer, what to take of it)
        for key in dict.fromkeys(keys):
            stack, base = keyspace.parse(key)
            if stack not in self.stacks:  # e.g. "norm" on an encoder–decoder: say which keys it has
                self._check(key)
            info = registry.key_info(base)
            if key in self._arrays:
                out[key] = _layer_view(self._arrays, key, layer, head)
                continue
            family = registry.family_of(base)
            if family.NAME == "rollouts" and self._rollout_one_at_a_time(base):
                out[key] = self._rollout_layer(stack, base, layer)
                continue
            if not getattr(family, "PER_LAYER", False):
                out[key] = self.get([key]).map(key, layer, head)
                continue
            request = self.request_of(stack) if stack in self.stacks else self.request
            li = _index(layer, request.n_layers, "layer", key)
            if info.per_head and head is None:
                if registry.is_key(base + "_layer") and registry.family_of(base + "_layer") is family:
                    todo[key] = (stack, base + "_layer", li, None)
                else:
                    todo[key] = (stack, base, li, "mean")
            elif info.per_head:
                todo[key] = (stack, base, li, _index(head, request.n_heads, "head", key))
            else:
                todo[key] = (stack, base, li, None)
        derived = {k: self._layer_maps.get((k, t[2], t[3])) for k, t in todo.items() if t[3] is not None}
        groups: dict[tuple, list[str]] = {}
        direct: dict[tuple, dict[str, object]] = {}  # α's head mean or one head, taken from the layer view itself
        for k, (stack, base, li, take) in todo.items():
            if derived.get(k) is not None:
                continue
            if take is not None and base == "attention" and stack != "cross" and registry.family_of(base).NAME == "weights":
                direct.setdefault((stack, li), {})[k] = take
                groups.setdefault((stack, li), [])
            else:
                groups.setdefault((stack, li), []).append(base)
        for g in list(groups):  # a long input's layer: α streamed in row blocks through every map it feeds
            got = self._streamed(g[0], g[1], {k: t for k, t in todo.items() if (t[0], t[2]) == g
                                              and derived.get(k) is None})
            if got is not None:
                out.update(got)
                del groups[g]
                direct.pop(g, None)
                todo = {k: t for k, t in todo.items() if k not in got}
        layers = {g: self._layers(g[0], list(dict.fromkeys(bases)), g[1], direct.get(g, {}))
                  for g, bases in groups.items()}
        for k, (stack, base, li, take) in todo.items():
            if derived.get(k) is not None:
                out[k] = derived[k]
                continue
            if k in direct.get((stack, li), {}):
                out[k] = layers[(stack, li)][k][0]
                continue
            arr, kept = layers[(stack, li)][base]
            if take is None:
                out[k] = arr
            elif take == "mean":
                out[k] = arr.mean(0)
                self._layer_maps.put((k, li, take), out[k])
            else:
                out[k] = arr[take] if kept else arr[take].copy()
                if not kept:  # the whole layer did not fit the cache: keep the one head shown
                    self._layer_maps.put((k, li, take), out[k])
        return {k: out[k] for k in dict.fromkeys(keys)}

    def layer_stack(self, key: str, layer: int) -> np.ndarray:
        """Every head of one layer of ``key`` at once: [H, rows, cols] for per-head keys, [1, rows, cols] for
        layer-level ones — layer ``layer`` of the whole array, the same numbers, without making the whole
        array. Per-layer families compute that layer alone (its [H, n, n] once for all heads, kept in the
        bounded layer cache when it fits); a key already computed whole is read from it; other keys (cross-layer
        maps, and the families a worker process computes) come whole through :meth:`get`."""
        stack, base = keyspace.parse(key)
        info, family = registry.key_info(base), registry.family_of(base)
        worker = self.worker is not None and self.worker.takes(self, family, [key])
        if key in self._arrays or not getattr(family, "PER_LAYER", False) or worker:
            arr = self.get([key])[key]
            li = _index(layer, arr.shape[0], "layer", key)
            return arr[li] if arr.ndim == 4 else arr[li][None]
        if not info.per_head:
            return self.map(key, layer)[None]
        request = self.request_of(stack) if stack in self.stacks else self.request
        li = _index(layer, request.n_layers, "layer", key)
        return self._layers(stack, [base], li)[base][0]

    def _rollout_one_at_a_time(self, base: str) -> bool:
        from .methods import rollouts

        return (rollouts.per_layer_source(base) is not None
                and rollouts.normalization_option(self.options) == "standard")

    def _rollout_layer(self, stack: str, base: str, layer: int) -> np.ndarray:
        """R_layer of a rollout with one [n, n] product at a time from the per-layer maps (each through
        :meth:`map`, so cached and bounded), resuming from the deepest R_k already in the cache."""
        from .methods import rollouts

        key = keyspace.spell(stack, base)
        request = self.request_of(stack) if stack in self.stacks else self.request
        layer = _index(layer, request.n_layers, "layer", key)
        keyspace.check(self.lm, stack, base, request, self.options)
        first, start = 0, None
        for k in range(layer, -1, -1):
            hit = self._layer_maps.get((key, k))
            if hit is not None:
                if k == layer:
                    return hit
                first, start = k + 1, hit.astype(np.float64)
                break
        source = keyspace.spell(stack, rollouts.per_layer_source(base))
        dtype = np.dtype(np.float32 if self.itemsize == 4 else np.float64)
        out = None
        acc = start
        for k in range(first, layer + 1):
            acc = rollouts.one_at_a_time(base, lambda i: self.map(source, i), acc, k, k)
            out = acc.astype(dtype)
            self._layer_maps.put((key, k), out)
        return out

    def _streamed(self, stack: str, layer: int, todo: dict[str, tuple]) -> dict[str, np.ndarray] | None:
        """``todo`` {key: (stack, base, layer, take)} of one layer computed with α streamed in row blocks
        (:mod:`normviz.methods.long_layer`: a long input's layer, never its whole α), each cached as
        (spelled base, layer) or (key, layer, take); None when that path does not serve them all (the caller
        then computes them on the layer view)."""
        import dataclasses

        from .methods import long_layer

        if stack == "cross" or not todo:
            return None
        got, want, hits = {}, {}, {}
        for k, (_, base, _, take) in todo.items():
            ck = (keyspace.spell(stack, base), layer) if take is None else (k, layer, take)
            hit = self._layer_maps.get(ck)
            if hit is not None:
                got[k], hits[ck] = hit, hit
            else:
                want[k] = (base, take, ck)
        if not want:
            return got
        with self._lock:
            view = self.layers(stack)[layer]
            wanted = list(dict.fromkeys((b, t) for b, t, _ in want.values()))
            if not long_layer.streamable(view, wanted):
                return None
            one = dataclasses.replace(self.request_of(stack) if stack in self.stacks else self.request, n_layers=1)
            for b in dict.fromkeys(b for b, _ in wanted):
                keyspace.check(self.lm, stack, b, one, self.options)  # applicability, and cost for one layer
            # room first (never the cache full and the new layer at once), within the long-input bound; the
            # layer's own cached maps (a head change keeps its layer-level maps) are put back after it
            self._layer_maps.reserve(len(wanted) * view.n * view.n * self.itemsize,
                                     float(self.options.get("long_map_cache_mb", memory.LONG_MAP_CACHE_MB)) * 2**20)
            try:
                arrays = long_layer.layer_maps(view, wanted)
            finally:
                view.clear()
        for ck, hit in hits.items():  # this layer's maps found in the cache: kept as its newest entries
            self._layer_maps.put(ck, hit)
        for k, (base, take, ck) in want.items():
            self._layer_maps.put(ck, arrays[(base, take)])
            got[k] = arrays[(base, take)]
        return got

    def _layers(self, stack: str, bases: list[str], layer: int,
                alpha_views: dict[str, object] | None = None) -> dict[str, tuple[np.ndarray, bool]]:
        """{base: (layer ``layer`` of it on ``stack`` ([H, n, n] or [n, n]), whether the cache kept it)}, from
        the cache or computed: every missing one checked first (applicability, cost for one layer), then all
        computed on the same layer view (one family call per family) before its derived tensors are dropped.
        ``alpha_views`` {key: "mean" or a head}: α's head mean or one head taken from the same view's α (what the
        weights family would copy whole, [H, n, n], to then keep one [n, n] of it), cached as (key, layer, take)
        and returned under ``key``."""
        import dataclasses

        from .methods import long_layer

        request = self.request_of(stack) if stack in self.stacks else self.request
        got = {}
        for b in bases:
            hit = self._layer_maps.get((keyspace.spell(stack, b), layer))
            if hit is not None:
                got[b] = (hit, True)
        missing = [b for b in bases if b not in got]
        alpha_views = alpha_views or {}
        if not missing and not alpha_views:
            return got
        one = dataclasses.replace(request, n_layers=1)
        for b in missing + (["attention"] if alpha_views else []):
            keyspace.check(self.lm, stack, b, one, self.options)  # applicability, and cost for one layer
        by_family: dict[str, list[str]] = {}
        for b in missing:
            by_family.setdefault(registry.family_of(b).NAME, []).append(b)
        with self._lock:
            view = self.layers(stack)[layer]
            try:
                # α's views first: a family's run clears the view's derived tensors (α included) when done, and
                # α would be recomputed (half of a long layer's CPU time at smollm2's n = 4000)
                for k, take in alpha_views.items():
                    alpha = view.alpha
                    arr = to_numpy(long_layer.head_mean(alpha) if take == "mean" else alpha[int(take)])
                    self._layer_maps.put((k, layer, take), arr)
                    got[k] = (arr, True)
                # the weights family drops each layer's α once copied (its whole-array path): it goes last, so
                # the norm family's run on this view uses the same α
                for name, bs in sorted(by_family.items(), key=lambda item: item[0] == "weights"):
                    inputs = Inputs(request=one, layer_views=lambda: [view], arrays={}, model=None, progress=None)
                    res = registry.families()[name].compute(inputs, bs, {**self.options, "compute_together": False})
                    for b in bs:
                        arr = res.arrays[b][0]
                        self._layer_maps.put((keyspace.spell(stack, b), layer), arr)
                        got[b] = (arr, self._layer_maps.get((keyspace.spell(stack, b), layer)) is arr)
            finally:
                view.clear()
        return got

    def _compute(self, todo: list[str], refused: dict, strict: bool, progress: Progress | None) -> None:
        order = list(registry.families())
        parsed = {k: keyspace.parse(k) for k in todo}

        def group(k):  # (stack, family name)
            stack, key = parsed[k] if k in parsed else keyspace.parse(k)
            return stack, registry.family_of(key).NAME

        steps = len({group(k) for k in todo})
        done_steps = 0

        def reporter(stack: str):
            prefix = "" if stack == "model" else f"{stack}: "

            def report(fraction: float, message: str) -> None:
                if progress:
                    progress(min(1.0, (done_steps + fraction) / max(steps, 1)), prefix + message)
            return report

        # a pass may stop after the last attention block when every family asked for reads only the attention
        # blocks (RECORD = "attention"): the last layer's FF block and the final norm are then not run
        full = not (self.options.get("stop_early", True)
                    and all(getattr(registry.families()[group(k)[1]], "RECORD", "full") == "attention" for k in todo))

        def views_of(stack: str):
            def layer_views():
                if stack not in self._views and progress:
                    progress(done_steps / max(steps, 1), "forward pass")
                return self.layers(stack, full)
            return layer_views

        pending = list(todo)
        while pending:
            ready = [k for k in pending
                     if all(keyspace.spell(parsed[k][0], r) in self._arrays for r in registry.requires(parsed[k][1]))]
            if not ready:
                raise RuntimeError(f"map keys {pending} wait on keys that were not computed")
            groups: dict[tuple[str, str], list[str]] = {}
            for k in sorted(ready, key=lambda k: (self.stacks.index(parsed[k][0]), order.index(group(k)[1]))):
                groups.setdefault(group(k), []).append(k)
            for (stack, name), ks in groups.items():
                family = registry.families()[name]
                ks = ks + self._free_siblings(stack, family, ks)
                prefix = keyspace.PREFIX[stack]
                base = [k[len(prefix):] for k in ks]
                arrays = {k[len(prefix):]: v for k, v in self._arrays.items()
                          if k.startswith(prefix) and keyspace.parse(k)[0] == stack}
                report = reporter(stack)
                inputs = Inputs(request=self.request_of(stack), layer_views=views_of(stack), arrays=arrays,
                                model=keyspace.stack_model(self.lm, stack) if getattr(family, "NEEDS_MODEL", False)
                                else None, progress=report)
                try:
                    out = self._run_family(stack, family, inputs, ks, report)
                except NormvizError as exc:
                    if strict:
                        raise
                    refused.update({k: exc for k in ks})
                    out = None
                if out is not None:
                    missing = [k for k in base if k not in out.arrays]
                    if missing:
                        raise RuntimeError(f"family {name} did not return {missing}")
                    self._arrays.update({prefix + k: out.arrays[k] for k in base})
                    self._notes.update({prefix + k: v for k, v in out.notes.items() if k in base})
                done_steps += 1
            for k in pending:  # keys whose requirement failed are refused too
                if k not in refused:
                    _refuse_dependent(k, refused)
            pending = [k for k in pending if k not in self._arrays and k not in refused]
        for views in self._views.values():
            for v in views:
                v.clear()

    def _run_family(self, stack: str, family, inputs: Inputs, spelled: list[str], report: Progress):
        """One family's keys of one stack (``spelled``; the Output is keyed by the stack's own names): in the
        heavy-methods worker when the session has one that takes them (:mod:`normviz.workers`, which rebuilds
        the session from :attr:`inputs` and computes the spelled keys), else here. A family that reruns the
        shared model with hooks that do not keep to their own thread (no ``HOOKS_OWN_THREAD``) holds the
        model's lock meanwhile."""
        prefix = keyspace.PREFIX[stack]
        ks = [k[len(prefix):] for k in spelled]
        if self.worker is not None and self.worker.takes(self, family, spelled):
            out = self.worker.compute(self, family, spelled, report)
            out.arrays = {k[len(prefix):]: v for k, v in out.arrays.items()}
            out.notes = {k[len(prefix):]: v for k, v in out.notes.items()}
            return out
        if inputs.model is not None and not getattr(family, "HOOKS_OWN_THREAD", False):
            with model_lock(self.lm.model):
                return family.compute(inputs, ks, self.options)
        return family.compute(inputs, ks, self.options)


@functools.lru_cache(maxsize=None)
def _itemsize(dtype) -> int:
    import torch

    return torch.empty((), dtype=dtype).element_size()


def _index(value: int, size: int, what: str, key: str) -> int:
    if not -size <= value < size:
        raise NormvizError(f"{what} {value} is out of range: {key} has {size} {what}s (0…{size - 1}).")
    return value % size


def _layer_view(arrays: dict, key: str, layer: int, head: int | None) -> np.ndarray:
    """One layer of a whole array, as :meth:`Analysis.map` reads it."""
    arr = arrays[key]
    layer = _index(layer, arr.shape[0], "layer", key)
    if arr.ndim == 3:
        return arr[layer]
    if head is None:
        if key.endswith("norm") and key + "_layer" in arrays:
            return arrays[key + "_layer"][layer]
        return arr[layer].mean(0)
    return arr[layer, _index(head, arr.shape[1], "head", key)]


def _axis(enc: Encoded) -> TokenAxis:
    return TokenAxis(tokens=enc.tokens, labels=enc.labels, ids=enc.ids, special=np.array(enc.special, dtype=bool))


def _tokenised(lm, text, text_pair, target, max_tokens, max_new_tokens, options) -> Part:
    """The input's part (not recorded yet): the text (pair) of a self-attention model, or an encoder–decoder's
    source and target."""
    if lm.is_encoder_decoder:
        return Recording.seq2seq(lm, seq2seq.prepare(lm, text, text_pair, target, max_tokens, max_new_tokens,
                                                     options))
    if target is not None:
        raise NormvizError(f"target= is for encoder–decoder models; {lm.name!r} is not one.")
    limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
    enc = encode(lm.tokenizer, text, text_pair, max_length=limit, decoder=lm.spec.causal)
    return Recording.text_batch(lm, [enc], options.get("record_attention", "auto"))[0]


def _refuse_dependent(key: str, refused: dict) -> bool:
    """Refuse ``key`` (in place) when a key it requires was refused; True if so."""
    stack, base = keyspace.parse(key)
    blocked = next((keyspace.spell(stack, r) for r in registry.requires(base)
                    if keyspace.spell(stack, r) in refused), None)
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
    return Session(lm, text, text_pair, max_tokens=max_tokens, options=options, target=target).get(
        keys if keys is not None else methods, progress=progress)


def analyze_batch(lm: LoadedModel, texts: list[str | tuple[str, str | None]], keys: Iterable[str] | None = None,
                  max_tokens: int | None = None, options: dict | None = None, *,
                  methods: Iterable[str] | None = None) -> list[Analysis]:
    """Several texts with one forward pass (right-padded; padding never enters a map)."""
    keys = keys if keys is not None else methods
    return [s.get(keys) for s in Session.batch(lm, texts, max_tokens=max_tokens, options=options)]


__all__ = ["Session", "analyze", "analyze_batch", "request_for", "resolve_keys"]

"""One forward pass that records what every map needs, per layer and per sequence.

For layer l the record holds
  x      [n, d]     layer input (residual stream)
  attn   [H, n, n]  attention weights α^h_ij of the same pass — or None for a long input, whose
                    ``qk`` (the attention call's q, k, v, mask: O(n·d)) recomputes them on demand
                    (:mod:`normviz.record.attention_capture`; :meth:`LayerRecord.attention`)
  z_attn [n, d]     the real vector entering the norm after the attention residual: post-LN x + Attn(x)
                    (the input of ``norm_after_attn``); pre-LN x + Attn(LN(x)) (the input of ``norm_before_ff``)
  z_ff   [n, d]     post-LN only: h + FF(h) (the input of ``norm_after_ff``)
  out    [n, d]     layer output
  v      [n, ·]     the value projection's own output (fused layouts: the whole q|k|v output)
  call   (args, kwargs) the layer's own call arguments in this pass, without the hidden states (attention
                    mask, rotary position embeddings …), cut to this sequence: a method that reruns a layer
                    (value zeroing) calls it exactly as the model did, with no second pass.
  final  [n, d]     last layer only: the stack's final hidden state (after its final norm, if any), what the
                    LM head reads (predictions ride this one pass: :mod:`normviz.attribution`)
Sequences of a batch are right-padded; records are cut back to each sequence's own length, so padded
positions never reach a map.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

import torch

from ..models.params import get_path
from . import alpha_into
from .attention_capture import AttentionInputs, attention_module_ids, capturing, rerun

if TYPE_CHECKING:  # type hints only: no import cycle with the loader
    from ..models.loading import LoadedModel


@dataclass
class LayerRecord:
    x: torch.Tensor
    attn: torch.Tensor
    z_attn: torch.Tensor
    z_ff: torch.Tensor | None
    out: torch.Tensor
    v: torch.Tensor | None = None  # output of the value projection (fused qkv for GPT-2), biases included
    call: tuple[tuple, dict] | None = None  # the layer's call arguments besides the hidden states
    final: torch.Tensor | None = None  # last layer only: the stack's final hidden state (after its final norm)
    qk: AttentionInputs | None = None  # long inputs: what recomputes attn (then None)
    o: torch.Tensor | None = None  # the attention output, where a norm follows it (ArchSpec.norm_after_attn_out)
    gates: torch.Tensor | None = None  # a mixture of experts: the router's gate of each expert [n, E] (0: not chosen)
    shared_gate: torch.Tensor | None = None  # its shared expert's gate input [n, 1] (sigmoid taken by the maps)
    m: torch.Tensor | None = None  # the FF output, where a norm follows it (ArchSpec.norm_after_ff_out)
    ff_a: torch.Tensor | None = None  # kept for explain (keep_ff): the FF's real pre-activation (ff_in's output)
    ff_b: torch.Tensor | None = None  # ... and a gated FF's up pre-activation (ff_up's output; fused: in ff_a)

    def attention(self, rows: slice | None = None) -> torch.Tensor:
        """α [H, n, n] (``rows``: of those receiving tokens): recorded, or recomputed from q, k by the model's
        own eager attention function."""
        if self.attn is not None:
            return self.attn if rows is None else self.attn[:, rows]
        return self.attention_inputs().weights(rows)

    def attention_inputs(self) -> AttentionInputs:
        """A long input's attention call inputs (q, k, v, mask …): as recorded, or with q and k recomputed when
        they were dropped after the pass (:func:`drop_qk`) by rerunning the layer on its recorded input up to
        its attention call (:func:`normviz.record.attention_capture.rerun`: bit for bit the recorded ones). Not kept:
        the caller holds them while it computes the layer's α."""
        qk = self.qk
        if qk is None or qk.query is not None:
            return qk
        got = rerun(qk.layer, self.x, self.call)
        if got is None:
            raise RuntimeError("rerunning the layer made no attention call to recompute q and k from")
        return qk.with_qk(got.query, got.key)

    @property
    def n_heads(self) -> int:
        return int(self.attn.shape[0] if self.attn is not None else self.qk.n_heads)

    def to(self, device: torch.device, dtype: torch.dtype | None = None) -> "LayerRecord":
        """The same record on `device` (layers of a model sharded with device_map live on several devices),
        its floating tensors in ``dtype`` (None: as recorded; half-precision records are upcast to float32)."""
        if self.x.device == device and (dtype is None or self.x.dtype == dtype):
            return self

        def move(t):
            return t.to(device=device, dtype=dtype if dtype is not None and t.is_floating_point() else t.dtype)

        moved = {
            f.name: move(getattr(self, f.name)) for f in fields(self) if isinstance(getattr(self, f.name), torch.Tensor)
        }
        if self.qk is not None:
            moved["qk"] = self.qk.to(device, dtype)
        if self.call is not None and self.x.device != device:
            args, kwargs = self.call
            moved["call"] = (tuple(_to(a, device) for a in args), {k: _to(v, device) for k, v in kwargs.items()})
        return replace(self, **moved)


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(_to(v, device) for v in value)
    return value


_LOCKS_GUARD = threading.Lock()


def model_lock(model: torch.nn.Module) -> threading.RLock:
    """One lock per torch model, held only while hooks are added to or removed from it (microseconds), never
    around a forward pass: every normviz hook acts only in the thread that added it (:func:`owner_only`), so
    passes of other threads run through it unchanged and concurrently."""
    with _LOCKS_GUARD:
        lock = model.__dict__.get("_normviz_lock")
        if lock is None:
            lock = threading.RLock()
            model.__dict__["_normviz_lock"] = lock
        return lock


# ---------------------------------------------------------------- layer call arguments
_DROPPED_KWARGS = ("past_key_values", "past_key_value", "cache", "layer_past", "use_cache")


def _cut(value, b: int, n: int, batch: int, length: int, name: str = ""):
    """``value`` (a layer call argument of the padded batch) for sequence b of length n.

    Tensors with the batch on dim 0 keep row b; the sequence axes named by the argument (the last two
    of an attention mask, axis 1 of position ids and position embeddings, axis 0 of cache positions) are
    cut to n. Anything else is passed through unchanged (value zeroing checks that the rerun reproduces
    the recorded output)."""
    if isinstance(value, tuple):
        return tuple(_cut(v, b, n, batch, length, name) for v in value)
    if not isinstance(value, torch.Tensor) or (batch == 1 and n == length):
        return value
    if name == "cache_position":
        return value[:n] if value.ndim == 1 and value.shape[0] == length else value
    if name == "alibi" and value.shape[-1] == length:  # ALiBi's biases (Falcon): [batch, H, 1, length] or
        if value.ndim == 4 and value.shape[0] == batch:  # [batch·H, 1, length], batch-major
            return value[b : b + 1, ..., :n]
        if value.ndim == 3 and value.shape[0] % batch == 0:
            return value.view(batch, -1, *value.shape[1:])[b, ..., :n]
    if value.ndim >= 1 and value.shape[0] == batch:
        value = value[b : b + 1]
    if name in ("attention_mask", "encoder_attention_mask", "causal_mask") and value.ndim == 4:
        q = slice(0, n) if value.shape[-2] == length else slice(None)
        k = slice(0, n) if value.shape[-1] == length else slice(None)
        return value[..., q, k]
    if name in ("position_ids", "position_embeddings") and value.ndim >= 2 and value.shape[1] == length:
        return value[:, :n]
    return value


@functools.lru_cache(maxsize=256)
def _positional_names(forward, skip: int) -> tuple[str, ...]:
    """The names of ``forward``'s positional parameters after the first ``skip`` (the hidden states, and
    ``self`` for a class's function): ``inspect.signature`` once per forward function, not per layer and pass."""
    import inspect

    return tuple(
        p.name
        for p in inspect.signature(forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )[skip:]


def _named(layer: torch.nn.Module, args: tuple, kwargs: dict) -> dict:
    """Positional arguments after the hidden states given their parameter names (BERT passes its mask
    positionally), so that each can be cut by name."""
    forward = layer.forward
    func = getattr(forward, "__func__", None)  # a bound method: its class's function, shared by every layer
    names = _positional_names(func, 2) if func is not None else _positional_names(forward, 1)
    if len(args) > len(names):
        raise RuntimeError(f"{type(layer).__name__} was called with more positional arguments than it names")
    return {**dict(zip(names, args)), **kwargs}


def layer_call(
    layer: torch.nn.Module, args: tuple, kwargs: dict, b: int, n: int, batch: int, length: int
) -> tuple[tuple, dict]:
    """The call of one layer for sequence b, as keyword arguments, without the hidden states and any KV cache."""
    named = _named(layer, args, kwargs)
    named = {
        k: _cut(v, b, n, batch, length, k)
        for k, v in named.items()
        if k not in _DROPPED_KWARGS and k != "hidden_states"
    }
    named["output_attentions"] = False
    return (), named


# ---------------------------------------------------------------- segment ids
def segment_ids(lm: "LoadedModel", token_type_ids: torch.Tensor | None) -> torch.Tensor | None:
    """The segment ids to give the model: the tokenizer's ``token_type_ids`` (from ``pad_batch``) when the
    model has segment embeddings (its forward takes ``token_type_ids`` and ``config.type_vocab_size`` covers
    the ids), else None. They change only the embeddings, so a layer rerun from its recorded input (value
    zeroing) needs nothing more."""
    if token_type_ids is None:
        return None
    import inspect

    try:
        takes = "token_type_ids" in inspect.signature(lm.model.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover - forward without a signature
        takes = False
    size = getattr(lm.config, "type_vocab_size", None)
    if not takes or size is None or int(token_type_ids.max()) >= int(size):
        return None
    return token_type_ids


# ---------------------------------------------------------------- the recording pass
@torch.no_grad()
def record(
    lm: "LoadedModel",
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    token_type_ids: torch.Tensor | None = None,
    attention: str = "auto",
    upto: str | None = None,
    keep_alpha: bool = False,
    keep_ff: int = 0,
) -> list[list[LayerRecord]]:
    """Run the model once on a right-padded batch; return records[b][layer] trimmed to each length.

    ``token_type_ids``: segment ids of sentence pairs (see :func:`segment_ids`), passed to the model.
    ``attention``: record α (``"weights"``), or q, k to recompute it per layer (``"qk"``), or ``"auto"``
    (:func:`records_qk`: q, k for long inputs). ``upto="attention"``: stop the pass where the last layer's
    attention block ends (at the input z_attn of its norm on the attention residual): the last layer's FF block
    and the final norm do not run, and its record has no ``out``, ``z_ff``, ``final`` (None); every other
    number is the full pass's (the same operations up to there). Passes of several threads run at once: the
    hooks record only this thread's pass. ``keep_alpha``: the caller keeps every layer's α (the ``attention`` map,
    as large as all of α): ``"auto"`` then records α where it goes straight into one block (:func:`records_qk`).
    ``keep_ff``: a float32 model's dense FF pre-activations are kept too (``ff_a``, ``ff_b``), up to that many
    bytes (the first layers' where all would not fit): explain's backward pass then takes its FF factors from
    them instead of recomputing the FF input projections (:func:`normviz.attribution.adjoint.factors_of`)."""
    return _record(lm, input_ids, attention_mask, token_type_ids, attention, upto, keep_alpha, keep_ff)


def owner_only(fn):
    """A hook that runs ``fn`` only in the thread that created it; in any other thread it returns None (no
    change). It accepts any arguments: torch decides whether to pass a pre-hook's kwargs by looking the hook
    up *after* it took its list of hooks, so a hook removed meanwhile by its owner can be called without them."""
    owner = threading.get_ident()

    def hook(*args):
        if threading.get_ident() == owner:
            return fn(*args)
        return None

    return hook


def add_hooks(model: torch.nn.Module, adders) -> list:
    """Register the hooks ``adders`` (callables returning a RemovableHandle) under the model's lock."""
    with model_lock(model):
        return [add() for add in adders]


def remove_hooks(model: torch.nn.Module, handles) -> None:
    with model_lock(model):
        for h in handles:
            h.remove()


class StopRecording(Exception):
    """Raised by the hook that ends a pass early (:meth:`Hooks.stop_before`)."""


class Hooks:
    """Forward hooks that write into ``store``, for the recording thread only (:func:`owner_only`).

    The hooks sit on modules shared by every thread; a map computed meanwhile in another thread may call
    one of them (e.g. a norm module on a recorded vector, or another visitor's recording pass), and must not
    overwrite this pass's records. They are collected first and added under the model's lock by
    :meth:`install` (:func:`add_hooks`); no lock is held during the pass itself."""

    def __init__(self, store: dict):
        self.store = store
        self.keep_bytes = 0  # what :meth:`kept_output` may still keep
        self._adders: list = []
        self._model: torch.nn.Module | None = None
        self.handles: list = []

    def layer_input(self, module: torch.nn.Module, key) -> None:
        """(key, "x"): the hidden states a layer is called with; (key, "call"): its other arguments."""

        def fn(mod, args, kwargs=None):
            kwargs = kwargs or {}
            if "hidden_states" in kwargs and kwargs["hidden_states"] is not None:
                self.store[(key, "x")] = kwargs["hidden_states"]
                self.store[(key, "call")] = (args, kwargs)
            else:
                self.store[(key, "x")] = args[0]
                self.store[(key, "call")] = (args[1:], kwargs)

        self._adders.append(lambda: module.register_forward_pre_hook(owner_only(fn), with_kwargs=True))

    def first_input(self, module: torch.nn.Module, key) -> None:
        def fn(mod, args):
            self.store[key] = args[0]

        self._adders.append(lambda: module.register_forward_pre_hook(owner_only(fn)))

    def output(self, module: torch.nn.Module, key) -> None:
        """The module's output (its first element when it returns a tuple)."""

        def fn(mod, args, out):
            self.store[key] = out[0] if isinstance(out, (tuple, list)) else out

        self._adders.append(lambda: module.register_forward_hook(owner_only(fn)))

    def kept_output(self, module: torch.nn.Module, key) -> None:
        """The module's output while every output kept by this method together stays within :attr:`keep_bytes`
        (then the rest are not kept)."""

        def fn(mod, args, out):
            size = out.numel() * out.element_size()
            if self.keep_bytes >= size:
                self.keep_bytes -= size
                self.store[key] = out

        self._adders.append(lambda: module.register_forward_hook(owner_only(fn)))

    def expert_gates(self, module: torch.nn.Module, key) -> None:
        """A mixture of experts' gates: the experts module is called with (states, top-k indices, top-k weights);
        stored dense, [tokens, E], zero for the experts not chosen."""

        def fn(mod, args, kwargs=None):
            kwargs = kwargs or {}
            names = ("hidden_states", "top_k_index", "top_k_weights")
            got = {**dict(zip(names, args)), **kwargs}
            idx = got.get("top_k_index", got.get("router_indices"))
            w = got.get("top_k_weights", got.get("routing_weights"))
            dense = torch.zeros(idx.shape[0], mod.num_experts, dtype=w.dtype, device=w.device)
            self.store[key] = dense.scatter_(1, idx.long(), w)

        self._adders.append(lambda: module.register_forward_pre_hook(owner_only(fn), with_kwargs=True))

    def stop_before(self, module: torch.nn.Module) -> None:
        """End the pass (:class:`StopRecording`) when ``module`` is called, after the hooks added before this one."""

        def fn(mod, args):
            raise StopRecording

        self._adders.append(lambda: module.register_forward_pre_hook(owner_only(fn)))

    def install(self, model: torch.nn.Module) -> None:
        """Add every collected hook, under the model's lock."""
        self._model = model
        self.handles = add_hooks(model, self._adders)
        self._adders = []

    def remove(self) -> None:
        if self._model is not None:
            remove_hooks(self._model, self.handles)
        self.handles = []


def _present(layer, path: str) -> bool:
    try:
        get_path(layer, path)
    except AttributeError:
        return False
    return True


def hook_stack(hooks: Hooks, layers, spec, tag: str = "", with_ff: bool = True) -> None:
    """Hooks for one stack of layers described by ``spec``; keys ((tag, i), name). ``with_ff=False``: no z_ff
    (a decoder stack of an encoder–decoder, whose FF input is not h of the self-attention block). Where
    ``hooks.keep_bytes`` > 0, a dense FF's pre-activations too (ff_a, ff_b: explain's FF factors need them)."""
    for i, layer in enumerate(layers):
        hooks.layer_input(layer, (tag, i))
        hooks.output(layer, ((tag, i), "out"))
        hooks.output(get_path(layer, spec.value), ((tag, i), "v"))
        if getattr(spec, "parallel", False):  # z = x + o: the attention module's output
            hooks.output(get_path(layer, spec.attn), ((tag, i), "o"))
        else:
            hooks.first_input(get_path(layer, spec.z_attn_module), ((tag, i), "z_attn"))
        if getattr(spec, "norm_after_attn_out", None):
            hooks.first_input(get_path(layer, spec.norm_after_attn_out), ((tag, i), "o"))
        if with_ff and getattr(spec, "norm_after_ff_out", None):
            hooks.first_input(get_path(layer, spec.norm_after_ff_out), ((tag, i), "m"))
        moe = getattr(spec, "moe", None)
        if with_ff and moe is not None and _present(layer, moe.experts):
            hooks.expert_gates(get_path(layer, moe.experts), ((tag, i), "gates"))
            if moe.shared_gate:
                hooks.output(get_path(layer, moe.shared_gate), ((tag, i), "shared_gate"))
        if with_ff and spec.norm_on_ff_residual:
            hooks.first_input(get_path(layer, spec.norm_on_ff_residual), ((tag, i), "z_ff"))
        if with_ff and hooks.keep_bytes > 0 and moe is None and spec.ff_in:
            hooks.kept_output(get_path(layer, spec.ff_in), ((tag, i), "ff_a"))
            if spec.ff_up:
                hooks.kept_output(get_path(layer, spec.ff_up), ((tag, i), "ff_b"))


def stack_records(
    store: dict,
    layers,
    attentions,
    lengths: list[int],
    length: int,
    tag: str = "",
    final: torch.Tensor | None = None,
    captured: dict | None = None,
) -> list[list[LayerRecord]]:
    """records[b][layer] of one hooked stack, each cut to its sequence's length (right padding); ``final``
    [batch, length, d]: the stack's final hidden state, kept on each sequence's last layer record.
    ``captured`` (long inputs): {id(attention module): AttentionInputs} instead of ``attentions``."""
    qks = None
    if captured is not None:
        qks = [next((captured[m] for m in attention_module_ids(layer) if m in captured), None) for layer in layers]
        if any(q is None for q in qks):
            raise RuntimeError("the attention calls of some layers were not recorded")
    elif attentions is None or len(attentions) != len(layers) or any(a is None for a in attentions):
        raise RuntimeError("the model returned no attention weights; it must run with attn_implementation='eager'")
    batch = len(lengths)
    records = []
    for k, t in list(store.items()):  # OPT flattens its tokens to [batch·length, d] before the FF block
        if isinstance(t, torch.Tensor) and t.ndim == 2 and t.shape[0] == batch * length and k[1] != "call":
            store[k] = t.view(batch, length, -1)
    for b, n in enumerate(lengths):
        n = int(n)
        seq = []
        masks: dict = {}  # the layers' shared mask, cut once for this sequence
        for i in range(len(layers)):
            key = (tag, i)
            z_ff = store.get((key, "z_ff"))
            o, m = store.get((key, "o")), store.get((key, "m"))
            gates, shared = store.get((key, "gates")), store.get((key, "shared_gate"))
            ff_a, ff_b = store.get((key, "ff_a")), store.get((key, "ff_b"))
            z_attn = store.get((key, "z_attn"))
            if z_attn is None:  # a parallel block: the residual plus the attention output
                z_attn = store[(key, "x")] + o
            args, kw = store[(key, "call")]
            seq.append(
                LayerRecord(
                    x=store[(key, "x")][b, :n],
                    attn=attentions[i][b, :, :n, :n] if qks is None else None,
                    z_attn=z_attn[b, :n],
                    z_ff=z_ff[b, :n] if z_ff is not None else None,
                    out=store[(key, "out")][b, :n] if (key, "out") in store else None,  # a pass stopped early
                    v=store[(key, "v")][b, :n],
                    call=layer_call(layers[i], args, kw, b, n, batch, length),
                    final=final[b, :n] if final is not None and i == len(layers) - 1 else None,
                    qk=qks[i].cut(b, n, masks) if qks is not None else None,
                    o=o[b, :n] if o is not None else None,
                    m=m[b, :n] if m is not None else None,
                    gates=gates[b, :n] if gates is not None else None,
                    shared_gate=shared[b, :n] if shared is not None else None,
                    ff_a=ff_a[b, :n] if ff_a is not None else None,
                    ff_b=ff_b[b, :n] if ff_b is not None else None,
                )
            )
        records.append(seq)
    if qks is not None and batch == 1:
        records[0] = drop_qk(records[0], layers)
    return records


DROP_QK = True  # a single long sequence's q and k are dropped after its pass when a rerun reproduces them
# ... and when every layer's q and k together exceed this: below it they are kept, since each use of α would
# otherwise rerun its layer up to the attention (gemma3's explain + sources at n = 1,024: 36 reruns, 10% of its
# CPU, to save 90 MB; smollm2's 94 MB there)
DROP_QK_FROM_BYTES = 128 * 2**20


def drop_qk(seq: list[LayerRecord], layers) -> list[LayerRecord]:
    """``seq`` with every layer's q and k dropped (recomputed on demand: :meth:`LayerRecord.attention_inputs`),
    if together they exceed :data:`DROP_QK_FROM_BYTES` and rerunning the first and the last layer on their
    recorded inputs gives their q and k bit for bit; else unchanged. Only a float32/float64 sequence recorded
    alone (a padded batch's rows were projected together with the others: a rerun of one sequence need not round
    the same)."""
    if not DROP_QK or not seq or seq[0].qk is None or seq[0].x.dtype not in (torch.float32, torch.float64):
        return seq
    if sum(rec.qk.nbytes for rec in seq) <= DROP_QK_FROM_BYTES:
        return seq
    for i in {0, len(seq) - 1}:
        qk = seq[i].qk
        got = rerun(layers[i], seq[i].x, seq[i].call)
        if got is None or not (torch.equal(got.query, qk.query) and torch.equal(got.key, qk.key)):
            return seq
    return [replace(rec, qk=rec.qk.dropped(layer)) for rec, layer in zip(seq, layers)]


QK_FROM_BYTES = 256 * 2**20  # α of all layers above this (L·H·n²·element size): record q, k instead


def records_qk(lm: "LoadedModel", length: int, batch: int = 1, mode: str = "auto", keep_alpha: bool = False) -> bool:
    """Whether a pass of ``batch`` sequences of ``length`` tokens records q, k (recomputing α on demand)
    rather than α itself: mode ``"qk"``, ``"weights"``, or ``"auto"`` (q, k when every layer's α together
    would exceed :data:`QK_FROM_BYTES`, unless ``keep_alpha`` — the caller keeps all of α as the ``attention`` map
    anyway — and the pass can write α straight into one block, :func:`normviz.record.alpha_into.wanted`: that block
    is then the map, no more memory than the map itself, and α is not computed a second time from q, k)."""
    if mode not in ("auto", "qk", "weights"):
        raise ValueError(f"record_attention must be 'auto', 'qk' or 'weights', not {mode!r}")
    if getattr(lm.spec, "attention_call", "interface") == "inline":
        return False  # the attention runs inline (Falcon): no call to record q, k from, so α itself
    if mode != "auto":
        return mode == "qk"
    if keep_alpha and alpha_into.wanted(lm.n_layers, lm.n_heads, length, batch, lm.dtype, lm.device):
        return False
    size = torch.empty((), dtype=lm.dtype).element_size()
    return lm.n_layers * lm.n_heads * length * length * size * batch > QK_FROM_BYTES


def _record(
    lm,
    input_ids,
    attention_mask,
    token_type_ids,
    mode: str = "auto",
    upto: str | None = None,
    keep_alpha: bool = False,
    keep_ff: int = 0,
) -> list[list[LayerRecord]]:
    store: dict = {}
    hooks = Hooks(store)
    # float32 only: a float64 model's norms may compute in float32 (Llama's, Gemma's RMSNorm), so its own
    # pre-activations are rounded to float32 while the FF parts sum to the norm's float64 output (1e-8 apart)
    hooks.keep_bytes = int(keep_ff) if lm.dtype == torch.float32 else 0
    qk = records_qk(lm, int(input_ids.shape[1]), int(input_ids.shape[0]), mode, keep_alpha)
    batch, length = int(input_ids.shape[0]), int(input_ids.shape[1])
    stop = upto == "attention" and alpha_into.install()
    out, stopped = None, False
    try:
        hook_stack(hooks, lm.layers, lm.spec)
        if stop:  # after hook_stack's: the last layer's z_attn is recorded first
            hooks.stop_before(get_path(lm.layers[-1], lm.spec.z_attn_module))
        hooks.install(lm.model)
        kwargs = {}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids.to(lm.device)
        if getattr(lm.config, "use_cache", False):
            kwargs["use_cache"] = False  # no KV cache: nothing reads it, and layers are rerun without one
        block = not qk and alpha_into.wanted(lm.n_layers, lm.n_heads, length, batch, lm.dtype, lm.device)
        # α straight into one pooled block (no copy for `attention`); a pass stopped early takes α from there
        seen = block or (stop and not qk)
        with (
            capturing() if qk else contextlib.nullcontext() as captured,
            (
                alpha_into.into(
                    [list(layer.modules()) for layer in lm.layers], lm.n_heads, length, lm.dtype, block=block
                )
                if seen
                else contextlib.nullcontext()
            ) as slots,
        ):
            try:
                out = lm.model(
                    input_ids=input_ids.to(lm.device),
                    attention_mask=attention_mask.to(lm.device),
                    output_attentions=not qk,
                    **kwargs,
                )
            except StopRecording:
                stopped = True
    finally:
        hooks.remove()
    attentions = None
    if not qk:
        attentions = out.attentions if not stopped else [slots.captured.get(i) for i in range(len(lm.layers))]
        if stopped and any(a is None for a in attentions):  # α not seen through the interface: the full pass
            return _record(lm, input_ids, attention_mask, token_type_ids, mode, keep_alpha=keep_alpha, keep_ff=keep_ff)
    return stack_records(
        store,
        lm.layers,
        attentions,
        attention_mask.sum(-1).tolist(),
        input_ids.shape[1],
        final=getattr(out, "last_hidden_state", None),
        captured=captured if qk else None,
    )

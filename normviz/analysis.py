"""Public entry point: ``analyze(model, text) -> Analysis`` (one recorded pass, pure maps after it)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
import torch

from . import methods as _methods  # registers built-in methods
from . import norm_maps
from .decompose import CHUNK_BYTES, LayerDecomposition, Workspace
from .errors import NormvizError, UnknownMethodError
from .models.loading import LoadedModel
from .record import model_lock, record
from .tokens import Encoded, encode, pad_batch

registry = _methods


@dataclass
class Analysis:
    """Token-to-token maps of one text. Arrays are numpy: [L,H,n,n] per head, [L,n,n] per layer."""

    model_name: str
    model_type: str
    placement: str  # "post" | "pre"
    tokens: list[str]
    labels: list[str]
    token_ids: list[int]
    special: np.ndarray
    arrays: dict[str, np.ndarray]
    n_layers: int
    n_heads: int
    dtype: str
    device: str
    text: str
    text_pair: str | None = None
    dropped: int = 0
    notes: dict[str, str] = field(default_factory=dict)
    bias_norms: dict[str, np.ndarray] = field(default_factory=dict)

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self.arrays[key]
        except KeyError:
            raise UnknownMethodError(f"{key!r} was not computed; computed maps: {', '.join(self.arrays)}.") from None

    def __contains__(self, key: str) -> bool:
        return key in self.arrays

    def keys(self) -> list[str]:
        return list(self.arrays)

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def map(self, key: str, layer: int, head: int | None = None) -> np.ndarray:
        """One [n, n] map. For per-head keys, ``head=None`` gives the layer-level view
        (mean of α over heads for ``attention``; ``norm_layer`` for ``norm``; the head mean otherwise)."""
        arr = self[key]
        if not -self.n_layers <= layer < self.n_layers:
            raise NormvizError(f"layer {layer} is out of range: this model has {self.n_layers} layers (0…{self.n_layers - 1}).")
        if arr.ndim == 3:
            return arr[layer]
        if head is None:
            if key == "norm" and "norm_layer" in self.arrays:
                return self.arrays["norm_layer"][layer]
            return arr[layer].mean(0)
        if not -self.n_heads <= head < self.n_heads:
            raise NormvizError(f"head {head} is out of range: this model has {self.n_heads} heads (0…{self.n_heads - 1}).")
        return arr[layer, head]

    def to_npz(self, path, dtype: str | None = None) -> None:
        """Write ``tokens`` and one array per key (shapes as in DESIGN.md)."""
        out = {"tokens": np.array(self.tokens, dtype=str)}
        for k, v in self.arrays.items():
            out[k] = v.astype(dtype) if dtype else v
        np.savez(path, **out)


def resolve_keys(lm: LoadedModel, methods: Iterable[str] | None) -> list[str]:
    placement = lm.spec.placement
    if methods is None:
        return registry.all_keys(placement, include_opt_in=False)
    keys = []
    for name in methods:
        name = name.strip()
        if not name:
            continue
        if name == "all":
            keys += registry.all_keys(placement, include_opt_in=False)
            continue
        if name in registry.methods() and name not in [i.key for m in registry.methods().values() for i in m.keys]:
            keys += [i.key for i in registry.methods()[name].keys if placement in i.placements]
            continue
        method, info = registry.lookup(name)
        if placement not in info.placements:
            raise UnknownMethodError(
                f"{name!r} applies to {'/'.join(info.placements)}-LN models only; {lm.name} is {placement}-LN."
            )
        keys.append(name)
    # add what model-scope methods need, keep order, drop duplicates
    out: list[str] = []

    def add(k):
        if k in out:
            return
        method, _ = registry.lookup(k)
        for req in method.requires:
            add(req)
        out.append(k)

    for k in keys:
        add(k)
    return out


def _plan(keys: list[str]):
    layer_methods: dict[str, list[str]] = {}
    model_methods: dict[str, list[str]] = {}
    for k in keys:
        method, _ = registry.lookup(k)
        target = layer_methods if method.scope == "layer" else model_methods
        target.setdefault(method.name, []).append(k)
    return layer_methods, model_methods


def layer_contexts(lm: LoadedModel, records, chunk_bytes: int = CHUNK_BYTES,
                   targets: Callable[[int], dict[str, torch.Tensor]] | None = None):
    """One :class:`LayerDecomposition` per layer of one sequence's records, each on its layer's device.

    The layers share one :class:`Workspace` (scratch buffers); ``targets(layer)`` may give output buffers
    that the maps of that layer are written into directly."""
    workspace = Workspace()
    for index, rec in enumerate(records):
        params = lm.layer_params(index)
        ctx = LayerDecomposition(rec.to(params.w_out.device), params, lm.spec.placement, chunk_bytes=chunk_bytes,
                                 workspace=workspace, targets=targets(index) if targets else None)
        ctx.index, ctx.lm = index, lm
        yield ctx


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu").numpy()


def _norm_family_runs(ctxs, layer_methods: dict[str, list[str]], arrays: dict[str, np.ndarray]) -> set[str]:
    """On CPU, the attention weights and the norm family of all layers up front, in runs of layers that share
    each compiled kernel call (:mod:`normviz.norm_maps`), written into the result arrays. Returns the keys
    done (none where the kernels can't serve these layers: the per-layer loop then computes them)."""
    keys = [k for k in layer_methods.get(_methods.core.NORM.name, []) if k in norm_maps.KEYS]
    if not keys or not norm_maps.applicable(ctxs):
        return set()
    L, c0 = len(ctxs), ctxs[0]
    H, n = c0.alpha.shape[0], c0.n
    dtype = torch.empty(0, dtype=c0.dtype).numpy().dtype
    fresh = {k: np.empty((L, H, n, n) if k == "norm" else (L, n, n), dtype=dtype) for k in keys}
    alpha = None
    if "attention" in layer_methods.get(_methods.core.ATTENTION.name, []):
        fresh["attention"] = np.empty((L, H, n, n), dtype=dtype)
        for layer, c in enumerate(ctxs):
            fresh["attention"][layer] = _to_numpy(c.attention())
        alpha = torch.from_numpy(fresh["attention"])
    for run in norm_maps.runs(ctxs):
        norm_maps.norm_family_run(ctxs[run], keys, {k: torch.from_numpy(fresh[k][run]) for k in keys},
                                  alpha=alpha[run] if alpha is not None else None)
    arrays.update(fresh)
    return set(fresh)


@torch.no_grad()
def analyze_encoded(lm: LoadedModel, encoded: list[Encoded], methods=None, options: dict | None = None,
                    progress: Callable[[float, str], None] | None = None, chunk_bytes: int = CHUNK_BYTES,
                    texts: list[tuple[str, str | None]] | None = None) -> list[Analysis]:
    # Recording and some methods (value zeroing) put hooks on the shared model: one analysis at a time per model.
    with model_lock(lm.model):
        return _analyze_encoded(lm, encoded, methods, options, progress, chunk_bytes, texts)


def _analyze_encoded(lm, encoded, methods, options, progress, chunk_bytes, texts) -> list[Analysis]:
    options = dict(options or {})
    keys = resolve_keys(lm, methods)
    layer_methods, model_methods = _plan(keys)
    longest = max((len(e.ids) for e in encoded), default=0)
    for name in {**layer_methods, **model_methods}:
        check = registry.methods()[name].precheck
        if check is not None:
            check(longest, lm.n_layers, options)  # refuse a costly input before the forward pass
    ids, mask = pad_batch(encoded, pad_id=0)
    if progress:
        progress(0.0, "forward pass")
    batch_records = record(lm, ids, mask)
    results = []
    L = lm.n_layers
    total_steps = len(batch_records) * L
    for b, records in enumerate(batch_records):
        arrays: dict[str, np.ndarray] = {}

        def targets(layer_index: int) -> dict[str, torch.Tensor]:
            # maps are written straight into their slice of the result arrays once those exist
            return {k: torch.from_numpy(a[layer_index]) for k, a in arrays.items()}

        ctxs = list(layer_contexts(lm, records, chunk_bytes, targets))
        done = _norm_family_runs(ctxs, layer_methods, arrays)
        for layer_index in range(L):
            ctx, ctxs[layer_index] = ctxs[layer_index], None  # each layer's caches go when it is done
            for name, ks in layer_methods.items():
                ks = [k for k in ks if k not in done]
                if not ks:
                    continue
                out = registry.methods()[name].compute(ctx, ks, options)
                for k in ks:
                    if k not in arrays:  # preallocate [L, ...] once instead of stacking at the end
                        value = _to_numpy(out[k])
                        arrays[k] = np.empty((L,) + value.shape, dtype=value.dtype)
                    dest = arrays[k][layer_index]
                    if out[k].device.type != "cpu" or out[k].data_ptr() != dest.ctypes.data:
                        dest[...] = _to_numpy(out[k])
            del ctx
            if progress:
                progress((b * L + layer_index + 1) / total_steps, f"layer {layer_index + 1}/{L}")
        enc = encoded[b]
        text, pair = (texts[b] if texts else ("", None))
        analysis = Analysis(
            model_name=lm.name, model_type=lm.model_type, placement=lm.spec.placement,
            tokens=enc.tokens, labels=enc.labels, token_ids=enc.ids, special=np.array(enc.special, dtype=bool),
            arrays=arrays, n_layers=L, n_heads=lm.n_heads, dtype=str(lm.dtype).replace("torch.", ""),
            device=str(lm.device), text=text, text_pair=pair, dropped=enc.dropped,
        )
        for name, ks in model_methods.items():
            out = registry.methods()[name].compute(analysis.arrays, analysis, ks, options)
            for k in ks:
                analysis.arrays[k] = out[k]
        analysis.arrays = {k: analysis.arrays[k] for k in keys}
        results.append(analysis)
    return results


def analyze(lm: LoadedModel, text: str, text_pair: str | None = None, methods: Iterable[str] | None = None,
            max_tokens: int | None = None, options: dict | None = None,
            progress: Callable[[float, str], None] | None = None, chunk_bytes: int = CHUNK_BYTES) -> Analysis:
    """Analyse one text (or sentence pair) with ``lm`` from :func:`normviz.load`.

    ``methods``: keys (``"norm"``, ``"attn_res_ln"`` …) or ``None`` for every default map of this model.
    Text longer than ``max_tokens`` (default: the model's window) is truncated with a TruncationWarning.
    """
    limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
    enc = encode(lm.tokenizer, text, text_pair, max_length=limit)
    return analyze_encoded(lm, [enc], methods=methods, options=options, progress=progress,
                           chunk_bytes=chunk_bytes, texts=[(text, text_pair)])[0]


def analyze_batch(lm: LoadedModel, texts: list[str | tuple[str, str | None]], methods=None,
                  max_tokens: int | None = None, options: dict | None = None, progress=None,
                  chunk_bytes: int = CHUNK_BYTES) -> list[Analysis]:
    """Analyse several texts with one forward pass (right-padded; padding never enters a map)."""
    limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
    pairs = [(t, None) if isinstance(t, str) else (t[0], t[1]) for t in texts]
    encoded = [encode(lm.tokenizer, t, p, max_length=limit) for t, p in pairs]
    return analyze_encoded(lm, encoded, methods=methods, options=options, progress=progress,
                           chunk_bytes=chunk_bytes, texts=pairs)

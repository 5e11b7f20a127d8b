"""Long inputs: record each layer's q and k (after position encoding) instead of α, and recompute α on demand.

A forward pass with ``output_attentions`` materialises α [H, n, n] for every layer and keeps it (L·H·n²
numbers: 2.8 GB per [30, 9, 1638, 1638] array of SmolLM2). For a long input the recording pass instead runs
the attention through the model's own attention call with q, k, v, the mask and the call's keyword
arguments recorded (O(n·d) per layer, the mask shared by every layer), and the layer's α is recomputed when
a map needs it by the model's **own eager attention function** on exactly those tensors:

    α = softmax(q kᵀ · scaling + mask)       (GQA's repeat_kv, sliding windows, padding: inside fn and mask)

so it is the α the eager path computes (same function, same inputs). The attention *output* of the
recording pass is computed without keeping any α: torch's scaled_dot_product_attention where the model's
eager function is the plain formula above (:data:`SDPA_SAFE`) and the model is not float64, else the eager
function itself (its α is dropped at once). The pass's layer outputs then differ from an all-eager pass by
rounding only (float32: ~1e-7 relative); a float64 model's are the eager pass's exactly (Llama's eager
softmax runs in float32 even there, which SDPA would not copy), so q, k records equal α records bit for bit.

How: transformers (≥ 5) picks a layer's attention function with ``ALL_ATTENTION_FUNCTIONS.get_interface``;
:func:`install` wraps that lookup once so that, in a thread that is recording (:func:`capturing`), the
model's function is wrapped by the recorder. Every other thread gets the model's own function unchanged:
concurrent passes of other visitors are not affected.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from dataclasses import dataclass, field, replace
from typing import Callable

import torch

from . import attention_interface

_STATE = threading.local()

# modeling modules whose eager attention is softmax(q kᵀ·scaling + mask) @ v (repeat_kv for GQA), nothing else
SDPA_SAFE = {
    f"transformers.models.{m}.modeling_{m}"
    for m in (
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "bert",
        "roberta",
        "electra",
        "distilbert",
        "gpt2",
        "xlm_roberta",
        "camembert",
        "gemma3",  # Gemma 3 passes no softcap (its eager then is the plain formula; the sliding window is in the mask)
    )
}
_DROPPED = ("output_attentions",)
WEIGHTS_BLOCK_BYTES = 64 << 20  # receiving rows per block of a recomputed α
# a causal block's keys are cut at a multiple of this: softmax's vectorised sums then meet the same values in
# the same lanes as over the whole row (the hidden keys add exact zeros), and α is bit-identical (tested)
SEEN_COLUMNS_STEP = 64


@dataclass
class AttentionInputs:
    """What one layer's attention call received: enough to recompute its α exactly.

    query [B, H, n, dh], key and value [B, KV, n, dh] (after rotary embeddings / q-k norms), mask the model's
    eager mask ([B|1, 1, n, n] additive, or None), kwargs the call's own (scaling, dropout, sliding_window …),
    fn the model's eager attention function, module the attention module it is called with."""

    fn: Callable
    module: torch.nn.Module
    query: torch.Tensor | None  # None: dropped after the pass (:meth:`dropped`), recomputed by :func:`rerun`
    key: torch.Tensor | None
    value: torch.Tensor
    mask: torch.Tensor | None
    kwargs: dict = field(default_factory=dict)
    layer: torch.nn.Module | None = None  # the layer whose attention this is (what :func:`rerun` calls)
    n_heads: int = 0  # query heads (known when q is dropped)
    # a sequence cut from a right-padded batch (:meth:`cut`): its own keys are the first ``keys``; key, value
    # and the mask keep the batch's padding keys (hidden by the mask), so that each softmax row has the length
    # it had in the pass, and α is computed over them and then cut to these ``keys`` columns. None: all keys.
    keys: int | None = None

    def dropped(self, layer: torch.nn.Module) -> "AttentionInputs":
        """The same inputs without q and k (the layer's largest O(n·d) records: 352 MB of smollm2's 1.05 GB at
        n = 4000), which :func:`rerun` recomputes from the layer's recorded input when α is needed."""
        return replace(self, query=None, key=None, layer=layer, n_heads=int(self.query.shape[1]))

    def with_qk(self, query: torch.Tensor, key: torch.Tensor) -> "AttentionInputs":
        return replace(self, query=query, key=key)

    def weights(self, rows: slice | None = None) -> torch.Tensor:
        """α [H, n, n] of the first (only) sequence, recomputed by the model's own function; ``rows``: only
        those receiving tokens (the mask's rows likewise). The whole α is computed in blocks of receiving rows
        of about ``WEIGHTS_BLOCK_BYTES`` each (softmax is per row): the eager function's scores, masked scores
        and softmax are then a block's, not three more [H, n, n] tensors (1.7 GB at smollm2's n = 4000)."""
        if rows is None:
            n, m = self.query.shape[2], self._keys()
            if self.block_rows() < n:
                out = None
                for a, b, cols, block in self.blocks():
                    if out is None:
                        out = torch.empty((block.shape[0], n, m), dtype=block.dtype, device=block.device)
                    out[:, a:b, :cols] = block
                    if cols < m:
                        out[:, a:b, cols:] = 0
                return out
        return self._weights(rows)

    def _keys(self) -> int:
        """How many columns α has: the sequence's own keys (:attr:`keys`)."""
        return self.key.shape[2] if self.keys is None else self.keys

    def block_rows(self, block_bytes: int | None = None) -> int:
        """Receiving rows per block of :meth:`blocks` (about ``block_bytes`` of α each; default
        :data:`WEIGHTS_BLOCK_BYTES`)."""
        block_bytes = WEIGHTS_BLOCK_BYTES if block_bytes is None else block_bytes
        h, m = self.query.shape[1], self.key.shape[2]
        return max(1, block_bytes // max(1, h * m * self.query.element_size()))

    def blocks(self, block_bytes: int | None = None):
        """α in blocks of receiving rows: (a, b, cols, α[:, a:b, :cols]) for a = 0, step, …; the keys from
        ``cols`` on are hidden from rows a … b − 1 (α exactly 0 there: :meth:`_seen_columns`). A map that
        streams them never holds the whole [H, n, n]."""
        n, m = self.query.shape[2], self.key.shape[2]
        step = self.block_rows(block_bytes)
        for a in range(0, n, step):
            b = min(n, a + step)
            cols = self._seen_columns(a, b, m)
            block = self._weights(slice(a, b), cols)
            yield a, b, block.shape[-1], block

    def _seen_columns(self, a: int, b: int, m: int) -> int:
        """How many leading keys rows a..b need: b (rounded up to SEEN_COLUMNS_STEP) where the mask hides every
        later key from them (causal, additive, ≤ half the dtype's lowest value: softmax gives them exactly 0),
        else m. A block of a causal model's rows is then computed over its own past only (half of α's
        products at long n)."""
        mask = self.mask
        if b >= m or mask is None or not mask.is_floating_point() or mask.shape[-1] != m:
            return m
        seen = mask.__dict__.setdefault("_normviz_seen_columns", {})  # {(a, b, m): cols}, kept with the mask
        # (every layer of a sequence shares its mask, :meth:`cut`: each block is asked once)
        key = (a, b, m)
        if key not in seen:
            c = min(m, -(-b // SEEN_COLUMNS_STEP) * SEEN_COLUMNS_STEP)
            tail = mask[..., a:b, c:]
            seen[key] = c if bool((tail <= torch.finfo(mask.dtype).min / 2).all()) else m
        return seen[key]

    def _weights(self, rows: slice | None, cols: int | None = None) -> torch.Tensor:
        q, mask, key, value = self.query, self.mask, self.key, self.value
        if rows is not None:
            q = q[:, :, rows]
            mask = mask[..., rows, :] if mask is not None else None
        if cols is not None and cols < key.shape[2]:  # keys the rows cannot see: left out (see _seen_columns)
            key, value = key[:, :, :cols], value[:, :, :cols]
            mask = mask[..., :cols] if mask is not None else None
        if getattr(self.fn, "__module__", None) in SDPA_SAFE:
            value = value[..., :1]  # α does not depend on v: the function's α @ v is then one column wide
        with torch.no_grad():
            alpha = self.fn(self.module, q, key, value, mask, **self.kwargs)[1][0]
        return alpha if self.keys is None or alpha.shape[-1] <= self.keys else alpha[..., : self.keys]

    def cut(self, b: int, n: int, masks: dict | None = None) -> "AttentionInputs":
        """Sequence b of a right-padded batch, its first n positions (queries). ``masks``: {id(mask): its cut},
        shared by the layers of one sequence, so that they share one cut mask too.

        The padding's keys are kept where the mask hides them from the n queries (:attr:`keys`): α is then
        computed over rows as long as the pass's, which is what makes it the pass's α bit for bit where the
        softmax runs in a lower precision than the model (Llama's eager softmax is float32 even in a float64
        model). torch's CPU softmax sums a row shorter than one SIMD vector (AVX2: 8 float32, AVX-512: 16) in
        order and a longer one lane by lane then across lanes: a 7-key row and the same row padded to 11 keys
        round differently (by a float32 ulp, up to 1.2e-7 relative) on an AVX2 machine. Keys hidden by the
        mask add exact zeros, so the rows' own keys get the pass's numbers and the hidden keys' columns are
        exactly 0."""
        mask, keys = self.mask, None
        m = self.key.shape[2]
        if mask is not None:
            whole = mask
            got = masks.get(id(whole)) if masks is not None else None
            if got is None:
                mask = whole[b : b + 1] if whole.shape[0] > 1 else whole
                mask = mask[..., :n, :]
                if not (n < m == mask.shape[-1] and _hides(mask[..., n:])):
                    mask = mask[..., :n]  # nothing to keep, or the padding is not hidden: the sequence's keys
                if masks is not None:
                    masks[id(whole)] = mask
            else:
                mask = got
            if mask.shape[-1] > n:
                keys = n
        k = m if keys is not None else n
        return replace(
            self,
            query=self.query[b : b + 1, :, :n],
            key=self.key[b : b + 1, :, :k],
            value=self.value[b : b + 1, :, :k],
            mask=mask,
            n_heads=int(self.query.shape[1]),
            keys=keys,
        )

    def to(self, device: torch.device | None = None, dtype: torch.dtype | None = None) -> "AttentionInputs":
        def move(t):
            return None if t is None else t.to(device=device or t.device, dtype=dtype or t.dtype)

        return replace(self, query=move(self.query), key=move(self.key), value=move(self.value), mask=move(self.mask))

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.query, self.key) if t is not None)


def _hides(mask: torch.Tensor) -> bool:
    """Whether an additive mask (a slice of it) hides every key it covers: each ≤ half the dtype's lowest value
    (softmax gives them exactly 0); a boolean one: all False."""
    if mask.dtype == torch.bool:
        return not bool(mask.any())
    return mask.is_floating_point() and bool((mask <= torch.finfo(mask.dtype).min / 2).all())


def _sdpa(module, query, key, value, mask, kwargs) -> torch.Tensor | None:
    """The attention output [B, n, H, dh] by torch's SDPA, where the model's eager function is the plain formula."""
    if kwargs.get("dropout", 0.0) or any(k in kwargs for k in ("softcap", "s_aux", "head_mask")):
        return None
    scaling = kwargs.get("scaling")
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    if mask is not None and mask.dtype != query.dtype:
        mask = mask.to(query.dtype)
    gqa = key.shape[1] != query.shape[1]
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=float(scaling), enable_gqa=gqa
    )
    return out.transpose(1, 2).contiguous()


class _Stop(Exception):
    """Raised by the attention call of a :func:`rerun` once its inputs are captured (nothing after it runs)."""


class _StopSink(dict):
    """A sink whose first captured call ends the rerun (:class:`_Stop`)."""


def _capturing(sink: dict, fn: Callable, module, query, key, value, attention_mask, *args, **kwargs):
    if args:  # positional extras: not a call we understand; run it as the model would
        return fn(module, query, key, value, attention_mask, *args, **kwargs)
    kw = {k: v for k, v in kwargs.items() if k not in _DROPPED}
    sink[id(module)] = AttentionInputs(fn, module, query, key, value, attention_mask, kw)
    if isinstance(sink, _StopSink):
        raise _Stop
    out = None
    if (
        query.dtype != torch.float64
        and getattr(fn, "__module__", None) in SDPA_SAFE
        and getattr(fn, "__name__", "") == "eager_attention_forward"
    ):
        out = _sdpa(module, query, key, value, attention_mask, kw)
    if out is None:
        out = fn(module, query, key, value, attention_mask, **kw)[0]
    return out, None


def _choose(fn: Callable) -> Callable:
    """The model's attention function, or its recorder in a thread that is recording (:func:`capturing`)."""
    sink = getattr(_STATE, "sink", None)
    return fn if sink is None else functools.partial(_capturing, sink, fn)


def install() -> bool:
    """Register :func:`_choose` with the attention-function lookup (once, thread-aware); False if this
    transformers has none."""
    return attention_interface.add(_choose)


@contextlib.contextmanager
def capturing():
    """Within this block, this thread's attention calls are recorded into the yielded dict {id(module):
    AttentionInputs}."""
    if not install():  # pragma: no cover
        raise RuntimeError("this transformers version has no attention interface to record q and k through")
    with attention_interface.thread_state(_STATE, "sink", {}) as sink:
        yield sink


def rerun(layer: torch.nn.Module, x: torch.Tensor, call: tuple[tuple, dict]) -> AttentionInputs | None:
    """The inputs of ``layer``'s attention call when it is called on ``x`` [n, d] (or a batch [B, n, d] of
    states of the same positions, e.g. :mod:`normviz.attribution.qk`'s component states) with its recorded ``call``
    (:attr:`normviz.record.recorder.LayerRecord.call`), by running the layer only up to that call (its norm and the
    q, k, v projections with position encoding: a few n·d² products, not the attention itself); None if the
    layer made no call through the attention interface. The same operations on the same tensors as in the
    recording pass: the same q and k bit for bit (checked before any are dropped,
    :func:`normviz.record.recorder.stack_records`)."""
    args, kwargs = call
    if not install():  # pragma: no cover
        return None
    with attention_interface.thread_state(_STATE, "sink", _StopSink()) as sink:
        try:
            with torch.no_grad():
                layer(x if x.dim() == 3 else x.unsqueeze(0), *args, **kwargs)
        except _Stop:
            pass
    return next(iter(sink.values()), None)


def attention_module_ids(layer: torch.nn.Module) -> set[int]:
    """Ids of every submodule of a layer (the attention module the interface is called with is one of them)."""
    return {id(m) for m in layer.modules()}


__all__ = ["AttentionInputs", "SDPA_SAFE", "attention_module_ids", "capturing", "install", "rerun"]

"""The recording pass's α written straight into one pooled [L, H, n, n] array, so that the ``attention`` map is
that array itself (no copy of every layer's α after the pass: 4–5 % of minilm's forward at n = 512).

How: transformers (≥ 5) picks a layer's attention function with ``ALL_ATTENTION_FUNCTIONS.get_interface``.
:func:`install` wraps that lookup once; in a thread that is recording into slots (:func:`into`), a model's
eager function ``eager_attention_forward`` is replaced by a **copy of the same function** (its own code, its
defaults) whose global ``nn`` resolves ``nn.functional.softmax`` to :func:`_softmax`, which computes

    torch.ops.aten._softmax.out(scores, -1, False, out=slot)     (the kernel F.softmax runs: the same bits)

into the slot of the layer being called, once per layer, and returns the slot; every other step (scores, mask,
dropout, α @ v) is the model's own code. Whatever does not match (a softmax with another dtype, as Llama's
float32 softmax of a float64 model; another shape; a second softmax in the layer; a function that does not
call ``nn.functional.softmax``) runs the model's softmax unchanged, and :func:`block_of` then finds no block:
the caller copies as before. Other threads always get the model's functions unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import types
from typing import Callable

import numpy as np
import torch

from ..core import pool
from . import attention_interface

_STATE = threading.local()
_CLONES: dict[Callable, Callable] = {}
MIN_BYTES = 1 << 20  # below this (minilm n < 48) the copy costs less than the pass's extra bookkeeping


def _softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``torch.nn.functional.softmax``, into the armed slot when it is this call's α."""
    slot = getattr(_STATE, "slot", None)
    if (
        slot is not None
        and dim is not None
        and dim in (-1, input.dim() - 1)
        and (dtype is None or dtype == input.dtype)
        and input.dtype == slot.dtype
        and tuple(input.shape) == tuple(slot.shape)
        and input.device == slot.device
    ):
        _STATE.slot = None  # once per layer
        return torch.ops.aten._softmax.out(input, -1, False, out=slot)
    return torch.nn.functional.softmax(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)


class _Functional(types.ModuleType):
    """``torch.nn.functional`` with :func:`_softmax` in place of its softmax."""

    softmax = staticmethod(_softmax)

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)


class _NN(types.ModuleType):
    """``torch.nn`` whose ``functional`` is :class:`_Functional`."""

    functional = _Functional("normviz_functional")

    def __getattr__(self, name):
        return getattr(torch.nn, name)


_NN_PROXY = _NN("normviz_nn")


def _clone(fn: Callable) -> Callable | None:
    """``fn`` with the global ``nn`` as :data:`_NN_PROXY` (None if ``fn`` is not a plain function reading it)."""
    if fn in _CLONES:
        return _CLONES[fn]
    clone = None
    code = getattr(fn, "__code__", None)
    if (
        isinstance(fn, types.FunctionType)
        and code is not None
        and "nn" in code.co_names
        and fn.__globals__.get("nn") is torch.nn
        and not hasattr(fn, "__wrapped__")
    ):
        clone = types.FunctionType(
            code, {**fn.__globals__, "nn": _NN_PROXY}, fn.__name__, fn.__defaults__, fn.__closure__
        )
        clone.__kwdefaults__ = fn.__kwdefaults__
        clone.__module__ = fn.__module__
    _CLONES[fn] = clone
    return clone


class _Slots:
    """The block's layer slots, each handed out once: to the first attention call of a module of its layer; and
    the α each layer's first attention call returned (``captured``: what ``output_attentions`` would give, for a
    pass stopped before the model returns)."""

    def __init__(self, block: torch.Tensor | None, layer_of: dict[int, int]):
        self.block = block
        self._free = dict(enumerate(block)) if block is not None else {}
        self.layer_of = layer_of
        self.captured: dict[int, torch.Tensor] = {}

    def take(self, layer: int | None) -> torch.Tensor | None:
        return None if layer is None else self._free.pop(layer, None)


def _calling(slots: _Slots, fn: Callable, clone: Callable | None, module, *args, **kwargs):
    layer = slots.layer_of.get(id(module))
    slot = slots.take(layer) if clone is not None else None
    if slot is None:
        out = fn(module, *args, **kwargs)
    else:
        _STATE.slot = slot
        try:
            out = clone(module, *args, **kwargs)
        finally:
            _STATE.slot = None
    if layer is not None and layer not in slots.captured and isinstance(out, tuple) and len(out) > 1:
        slots.captured[layer] = out[1]
    return out


def _choose(fn: Callable) -> Callable:
    """The model's attention function ``fn``, or — in a thread recording into slots (:func:`into`) — it seen
    through :func:`_calling` (an eager one as its clone writing α into the layer's slot)."""
    slots = getattr(_STATE, "slots", None)
    if slots is None:
        return fn
    clone = _clone(fn) if getattr(fn, "__name__", "") == "eager_attention_forward" else None
    return functools.partial(_calling, slots, fn, clone)


def install() -> bool:
    """Register :func:`_choose` with the attention-function lookup (once); False if this transformers has none."""
    return attention_interface.add(_choose)


def wanted(n_layers: int, n_heads: int, length: int, batch: int, dtype: torch.dtype, device: torch.device) -> bool:
    """Whether a pass of this shape records α into a block: one sequence, float32/float64 on the CPU, α of all
    layers ≥ :data:`MIN_BYTES`."""
    if batch != 1 or dtype not in (torch.float32, torch.float64) or torch.device(device).type != "cpu":
        return False
    return n_layers * n_heads * length * length * torch.empty((), dtype=dtype).element_size() >= MIN_BYTES


@contextlib.contextmanager
def into(modules: list[list[torch.nn.Module]], n_heads: int, length: int, dtype: torch.dtype, block: bool = True):
    """Within this block, this thread's attention calls of layer l (called with one of the modules
    ``modules[l]``) are seen: the α each returns is kept (``.captured[l]``), and with ``block`` an eager one
    writes α into ``.block[l]`` of a pooled block [L, 1, H, n, n]. Yields the :class:`_Slots` (None if this
    transformers has no attention interface). Which layers wrote into the block is known afterwards only from
    the α tensors the pass returned (:func:`block_of`)."""
    if not install():  # pragma: no cover
        yield None
        return
    arr = (
        torch.from_numpy(
            pool.empty((len(modules), 1, n_heads, length, length), np.dtype(str(dtype).removeprefix("torch.")))
        )
        if block
        else None
    )
    layer_of = {id(m): layer for layer, ms in enumerate(modules) for m in ms}
    with attention_interface.thread_state(_STATE, "slots", _Slots(arr, layer_of)) as slots:
        yield slots


def block_of(alphas: list[torch.Tensor]) -> torch.Tensor | None:
    """[L, H, n, n]: the α tensors as one tensor over the memory they already share — each contiguous and the
    next one right after it in one storage (as :func:`into` writes them) — else None."""
    if not alphas:
        return None
    a0 = alphas[0]
    if not a0.is_contiguous() or a0.device.type != "cpu":
        return None
    step = a0.numel() * a0.element_size()
    for k, a in enumerate(alphas):
        if (
            a.shape != a0.shape
            or a.dtype != a0.dtype
            or not a.is_contiguous()
            or a.untyped_storage().data_ptr() != a0.untyped_storage().data_ptr()
            or a.data_ptr() != a0.data_ptr() + k * step
        ):
            return None
    end = a0.data_ptr() + len(alphas) * step
    storage = a0.untyped_storage()
    if end > storage.data_ptr() + storage.nbytes():
        return None
    return torch.as_strided(a0, (len(alphas),) + tuple(a0.shape), (a0.numel(),) + tuple(a0.stride()))

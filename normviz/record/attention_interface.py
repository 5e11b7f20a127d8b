"""transformers' attention-function lookup, wrapped once for every normviz recorder of it.

transformers (≥ 5) picks a layer's attention function with ``ALL_ATTENTION_FUNCTIONS.get_interface`` at each
call. :func:`add` wraps that lookup once (process-wide) and registers a *chooser*: a function of the model's
attention function that returns it unchanged or a replacement. Choosers decide per call from their own
thread-local state (:mod:`normviz.record.attention_capture` for long inputs, :mod:`normviz.record.alpha_into` for α
written
into one block), so a thread that records nothing gets the model's own functions.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable

_LOCK = threading.Lock()
_CHOOSERS: list[Callable] = []
_INSTALLED = False


def add(chooser: Callable[[Callable], Callable]) -> bool:
    """Wrap the lookup (once) and register ``chooser`` (once); False if this transformers has no interface."""
    global _INSTALLED
    with _LOCK:
        if not _INSTALLED:
            try:
                from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
            except ImportError:  # pragma: no cover - transformers without the interface
                return False
            original = ALL_ATTENTION_FUNCTIONS.get_interface

            def get_interface(attn_implementation, default):
                fn = original(attn_implementation, default)
                for choose in tuple(_CHOOSERS):
                    fn = choose(fn)
                return fn

            ALL_ATTENTION_FUNCTIONS.get_interface = get_interface
            _INSTALLED = True
        if chooser not in _CHOOSERS:
            _CHOOSERS.append(chooser)
        return True


@contextlib.contextmanager
def thread_state(local: threading.local, name: str, value):
    """``local.<name>`` is ``value`` in this thread within the block (a chooser's state), then what it was."""
    previous = getattr(local, name, None)
    setattr(local, name, value)
    try:
        yield value
    finally:
        setattr(local, name, previous)

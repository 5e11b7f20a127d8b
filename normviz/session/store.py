"""What one :class:`~normviz.session.session.Session` holds, as one object the session owns and hands to its jobs
(the schedule, the layer maps, the map budget, the attribution): nothing outside the session's class reads the
session's private attributes (``tests/unit/test_session_state.py``).

    arrays[key]   the whole maps computed so far, by spelled key ("norm", "cross:norm" …)
    notes[key]    a family's note on a key (what it did, what it dropped)
    views[stack]  the records' per-layer views of each stack; views_of[stack]: the records they were made from
    layer_maps    the bounded cache of per-layer maps of long texts (:class:`normviz.core.memory.LayerCache`)
    frozen        the attribution's frozen coefficients (the FF factors), shared by every target of the text
    lock          one re-entrant lock: the views' cached tensors are shared by the threads of one session
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.memory import LayerCache


@dataclass(eq=False)
class MapStore:
    """A session's computed state (see the module's docstring); ``held_bytes`` is what its whole maps hold."""

    layer_maps: LayerCache
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    views: dict[str, list[Any]] = field(default_factory=dict)
    views_of: dict[str, list[Any]] = field(default_factory=dict)
    frozen: Any = None
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def held_bytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())


__all__ = ["MapStore"]

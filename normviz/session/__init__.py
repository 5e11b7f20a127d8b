"""``Session(lm, text)`` and its jobs: the session itself (``session``), which family computes which key and when
(``schedule``), whole arrays against the memory budget (``map_budget``) and one layer at a time (``layer_maps``).
"""

from .session import Session, analyze, analyze_batch, request_for, resolve_keys

__all__ = ["Session", "analyze", "analyze_batch", "request_for", "resolve_keys"]

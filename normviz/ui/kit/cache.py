"""The app's caches of loaded models and analyses: the one bounded cache, :class:`normviz.core.cache.BoundedCache`
(least recently used out first, here bounded by a count of entries; thread-safe).

The app keeps one instance of each in ``st.cache_resource`` so every session shares them. Values are never
mutated by the app: callers read arrays and build new ones.
"""

from __future__ import annotations

from ...core.cache import BoundedCache

__all__ = ["BoundedCache"]

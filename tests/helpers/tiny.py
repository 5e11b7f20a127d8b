"""Tiny randomly initialised models of every supported architecture, in float64 (the conftest fixture
``tiny_model(arch)`` caches them per session; :func:`build` makes a fresh one): :mod:`normviz.devtools.tiny`."""
from normviz.devtools.tiny import (ARCHS, COMMON, _configs, build, distinct, encoded, from_ids,  # noqa: F401
                                   randomize_weights)

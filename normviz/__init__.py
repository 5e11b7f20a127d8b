"""normviz: how much each token really contributes to every other token inside a transformer.

>>> import normviz
>>> lm = normviz.load("minilm")
>>> session = normviz.Session(lm, "The cat sat on the mat.")   # tokenised; recorded on first need
>>> a = session.get(["attention", "norm"])                      # one forward pass
>>> a["norm"].shape      # [layers, heads, n, n]
>>> session.get(["attn_res_ln"])                                # no forward pass: the records are kept
>>> figs = normviz.show(a, maps=["attention", "norm"], layer=2)  # plotly figures (see normviz.show)

Why this token: ``session.predict(top=10)``, ``session.explain(token=" Paris", foil=" London")`` (exact parts
of the logit per layer, head and input token), ``session.logit_lens()``, ``normviz.routes(session)`` (information-flow
routes; see :mod:`normviz.attribution`),
``session.attend(layer, head, query, key)`` (a head's score split exactly), ``normviz.graph(session)`` (an exact
attribution graph with heads as nodes, Neuronpedia's JSON).

Encoder–decoders (``normviz.load("toy-mt")``, Marian, BART, T5 …): the same ``Session(lm, source, target=…)``,
keys ``encoder_…``, ``decoder_…``, ``cross_…``; ``normviz.all_keys(lm)`` lists every key a model offers
(see :mod:`normviz.methods.keyspace`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .core import compat as _compat

_compat.install()  # the old module names (normviz.errors, normviz.keyspace …) for one release

# The facade is lazy (PEP 562): ``import normviz`` loads no torch; each name imports its module on first use.
_NAMES = {
    "aer": "normviz.align",
    "Analysis": "normviz.core.analysis",
    "transformed_norms": "normviz.core.fx",
    "all_keys": "normviz.methods.keyspace",
    "key_info": "normviz.methods.keyspace",
    "register_family": "normviz.methods",
    "EMBEDDED": "normviz.models",
    "LoadedModel": "normviz.models",
    "from_model": "normviz.models",
    "load": "normviz.models",
    "register_architecture": "normviz.models",
    "Session": "normviz.session.session",
    "analyze": "normviz.session.session",
    "analyze_batch": "normviz.session.session",
    "Candidate": "normviz.attribution",
    "Explanation": "normviz.attribution",
    "Routes": "normviz.attribution",
    "routes": "normviz.attribution",
    "Graph": "normviz.attribution.graph",
    "graph": "normviz.attribution.graph",
    "Attend": "normviz.attribution.qk",
    "show": "normviz.viz.notebook",
}
_MODULES = {"encdec": "normviz.record.encdec", "errors": "normviz.core.errors"}
_FOLDERS = (
    "align",
    "attribution",
    "cli",
    "core",
    "corpus",
    "methods",
    "models",
    "record",
    "session",
    "trust",
    "ui",
    "viz",
    "workers",
)

if TYPE_CHECKING:  # what the names are, for type checkers and the API docs
    from .align import aer  # type: ignore[no-redef]  # normviz.align.aer is a module and a function
    from .attribution import Candidate, Explanation, Routes, routes
    from .attribution.graph import Graph, graph
    from .attribution.qk import Attend
    from .core import errors
    from .core.analysis import Analysis
    from .core.fx import transformed_norms
    from .methods import register_family
    from .methods.keyspace import all_keys, key_info
    from .models import EMBEDDED, LoadedModel, from_model, load, register_architecture
    from .record import encdec
    from .session.session import Session, analyze, analyze_batch
    from .viz.notebook import show


def __getattr__(name: str):
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    elif name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _FOLDERS:
        value = importlib.import_module(f"normviz.{name}")
    else:
        raise AttributeError(f"module 'normviz' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_FOLDERS))


__all__ = [
    "Analysis",
    "Attend",
    "Candidate",
    "EMBEDDED",
    "Explanation",
    "Graph",
    "LoadedModel",
    "Routes",
    "Session",
    "aer",
    "all_keys",
    "analyze",
    "analyze_batch",
    "encdec",
    "errors",
    "from_model",
    "graph",
    "key_info",
    "load",
    "register_architecture",
    "register_family",
    "routes",
    "show",
    "transformed_norms",
]
__version__ = "0.1.0"

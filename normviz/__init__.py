"""normviz: how much each token really contributes to every other token inside a transformer.

>>> import normviz
>>> lm = normviz.load("minilm")
>>> session = normviz.Session(lm, "The cat sat on the mat.")   # tokenised; recorded on first need
>>> a = session.get(["attention", "norm"])                      # one forward pass
>>> a["norm"].shape      # [layers, heads, n, n]
>>> session.get(["attn_res_ln"])                                # no forward pass: the records are kept
>>> figs = normviz.show(a, maps=["attention", "norm"], layer=2)  # plotly figures (see normviz.show)

Why this token: ``session.predict(top=10)``, ``session.explain(token=" Paris", foil=" London")`` (exact parts
of the logit per layer, head and input token), ``session.logit_lens()``, ``normviz.routes(session)`` (information-flow routes; see :mod:`normviz.attribution`),
``session.attend(layer, head, query, key)`` (a head's score split exactly), ``normviz.graph(session)`` (an exact
attribution graph with heads as nodes, Neuronpedia's JSON).

Encoder–decoders (``normviz.load("toy-mt")``, Marian, BART, T5 …): the same ``Session(lm, source, target=…)``,
keys ``encoder_…``, ``decoder_…``, ``cross_…``; ``normviz.all_keys(lm)`` lists every key a model offers
(see :mod:`normviz.keyspace`).
"""
from . import encdec, errors
from .align import aer
from .analysis import Analysis
from .keyspace import all_keys, key_info
from .methods import register_family
from .models import EMBEDDED, LoadedModel, from_model, load, register_architecture
from .fx import transformed_norms
from .session import Session, analyze, analyze_batch
from .attribution import Candidate, Explanation, Routes, routes
from .attribution.graph import Graph, graph
from .attribution.qk import Attend
from .notebook import show

__all__ = ["Analysis", "Attend", "Candidate", "Explanation", "Graph", "Routes", "graph", "routes", "aer", "EMBEDDED", "LoadedModel", "Session", "all_keys", "analyze", "analyze_batch", "encdec",
           "errors", "from_model", "key_info", "load", "register_architecture", "register_family", "show",
           "transformed_norms"]
__version__ = "0.1.0"

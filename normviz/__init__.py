"""normviz: how much each token really contributes to every other token inside a transformer.

>>> import normviz
>>> lm = normviz.load("minilm")
>>> a = normviz.analyze(lm, "The cat sat on the mat.")
>>> a["norm"].shape      # [layers, heads, n, n]
"""
from . import errors
from .analysis import Analysis, analyze, analyze_batch
from .methods import all_keys, key_info
from .models import EMBEDDED, LoadedModel, from_model, load

__all__ = ["Analysis", "EMBEDDED", "LoadedModel", "all_keys", "analyze", "analyze_batch", "errors", "from_model",
           "key_info", "load"]
__version__ = "0.1.0"

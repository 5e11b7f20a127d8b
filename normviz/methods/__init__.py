"""Map families. Importing this package registers every built-in method."""
from . import core  # noqa: F401  (registers attention, norm, ff)
from . import rollout, effective, alti, flow, value_zeroing  # noqa: F401,E402  (cross-layer and alternative maps)
from .registry import KeyInfo, Method, all_keys, key_info, lookup, methods, register

__all__ = ["KeyInfo", "Method", "all_keys", "key_info", "lookup", "methods", "register"]

"""Map families. Importing this package registers every built-in method."""
from . import core  # noqa: F401  (registers attention, norm, ff)
from .registry import KeyInfo, Method, all_keys, key_info, lookup, methods, register

__all__ = ["KeyInfo", "Method", "all_keys", "key_info", "lookup", "methods", "register"]

"""Model loading and the architecture table."""

from .arch import ARCHITECTURES, ArchSpec, register_architecture, supported_text
from .loading import EMBEDDED, LoadedModel, from_model, load

__all__ = [
    "ARCHITECTURES",
    "ArchSpec",
    "EMBEDDED",
    "LoadedModel",
    "from_model",
    "load",
    "register_architecture",
    "supported_text",
]

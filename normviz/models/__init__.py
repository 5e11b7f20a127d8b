"""Model loading and per-architecture adapters."""
from .arch import ARCHITECTURES, ArchSpec, supported_text
from .loading import EMBEDDED, LoadedModel, from_model, load

__all__ = ["ARCHITECTURES", "ArchSpec", "EMBEDDED", "LoadedModel", "from_model", "load", "supported_text"]

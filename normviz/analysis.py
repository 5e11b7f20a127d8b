"""The result of ``Session.get(keys)``: token-to-token maps of one text as numpy arrays."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import NormvizError, UnknownMethodError


@dataclass
class Analysis:
    """Maps of one text. Arrays are numpy: [L,H,n,n] per head, [L,n,n] per layer; rows receive, columns
    contribute. ``refused``: map keys that were not computed, with the reason (``Session.get(strict=False)``)."""

    model_name: str
    model_type: str
    placement: str  # "post" | "pre"
    causal: bool
    tokens: list[str]
    labels: list[str]
    token_ids: list[int]
    special: np.ndarray
    arrays: dict[str, np.ndarray]
    n_layers: int
    n_heads: int
    dtype: str
    device: str
    text: str
    text_pair: str | None = None
    dropped: int = 0
    notes: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    waited_s: float = 0.0  # seconds this request waited for others (the same text's session, a busy worker)

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self.arrays[key]
        except KeyError:
            why = f" ({self.refused[key]})" if key in self.refused else ""
            raise UnknownMethodError(f"{key!r} was not computed{why}; computed map keys: {', '.join(self.arrays)}.") from None

    def __contains__(self, key: str) -> bool:
        return key in self.arrays

    def keys(self) -> list[str]:
        return list(self.arrays)

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def map(self, key: str, layer: int, head: int | None = None) -> np.ndarray:
        """One [n, n] map. For per-head keys, ``head=None`` gives the layer-level view
        (mean of α over heads for ``attention``; ``norm_layer`` for ``norm``; the head mean otherwise)."""
        arr = self[key]
        if not -self.n_layers <= layer < self.n_layers:
            raise NormvizError(f"layer {layer} is out of range: this model has {self.n_layers} layers (0…{self.n_layers - 1}).")
        if arr.ndim == 3:
            return arr[layer]
        if head is None:
            if key == "norm" and "norm_layer" in self.arrays:
                return self.arrays["norm_layer"][layer]
            return arr[layer].mean(0)
        if not -self.n_heads <= head < self.n_heads:
            raise NormvizError(f"head {head} is out of range: this model has {self.n_heads} heads (0…{self.n_heads - 1}).")
        return arr[layer, head]

    def to_npz(self, path, dtype: str | None = None) -> None:
        """Write ``tokens`` and one array per key (shapes as in DESIGN.md)."""
        out = {"tokens": np.array(self.tokens, dtype=str)}
        for k, v in self.arrays.items():
            out[k] = v.astype(dtype) if dtype else v
        np.savez(path, **out)

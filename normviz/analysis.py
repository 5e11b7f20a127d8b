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
    # encoder–decoders (None otherwise): ``tokens`` are the source's; see normviz.encdec.session
    src_tokens: list[str] | None = None  # encoder input tokens: columns of the cross maps
    tgt_tokens: list[str] | None = None  # decoder input tokens (start token, target without its last token): rows
    out_tokens: list[str] | None = None  # the token each decoder row predicts under teacher forcing (labels)
    src_labels: list[str] | None = None
    tgt_labels: list[str] | None = None
    out_labels: list[str] | None = None
    src_ids: list[int] | None = None
    tgt_ids: list[int] | None = None
    out_ids: list[int] | None = None
    tgt_special: np.ndarray | None = None  # special-token flags of tgt_tokens (``special`` is the source's)
    predicted_ids: list[int] | None = None  # argmax of the LM head per decoder row (None without one)
    target_text: str | None = None  # the target given, or the one generated

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
    def is_encoder_decoder(self) -> bool:
        return self.src_tokens is not None

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def map(self, key: str, layer: int, head: int | None = None) -> np.ndarray:
        """One [n, n] map. For per-head keys, ``head=None`` gives the layer-level view
        (mean of α over heads for ``attention``; ``norm_layer`` for ``norm`` (likewise ``encoder_norm``,
        ``decoder_norm``, ``cross_norm``); the head mean otherwise). Ranges are those of the key's own array
        (an encoder–decoder's decoder may have other layer and head counts than its encoder)."""
        arr = self[key]
        n_layers = arr.shape[0]
        if not -n_layers <= layer < n_layers:
            raise NormvizError(f"layer {layer} is out of range: {key} has {n_layers} layers (0…{n_layers - 1}).")
        if arr.ndim == 3:
            return arr[layer]
        if head is None:
            if key.endswith("norm") and key + "_layer" in self.arrays:
                return self.arrays[key + "_layer"][layer]
            return arr[layer].mean(0)
        n_heads = arr.shape[1]
        if not -n_heads <= head < n_heads:
            raise NormvizError(f"head {head} is out of range: {key} has {n_heads} heads (0…{n_heads - 1}).")
        return arr[layer, head]

    def to_npz(self, path, dtype: str | None = None) -> None:
        """Write ``tokens`` and one array per key (shapes as in DESIGN.md); encoder–decoders also
        ``src_tokens`` (= ``tokens``) and ``tgt_tokens``."""
        out = {"tokens": np.array(self.tokens, dtype=str)}
        if self.is_encoder_decoder:
            out["src_tokens"] = np.array(self.src_tokens, dtype=str)
            out["tgt_tokens"] = np.array(self.tgt_tokens, dtype=str)
        for k, v in self.arrays.items():
            out[k] = v.astype(dtype) if dtype else v
        np.savez(path, **out)

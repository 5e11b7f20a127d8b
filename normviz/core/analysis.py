"""The result of ``Session.get(keys)``: token-to-token maps of one text as numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import NormvizError, UnknownKeyError


@dataclass(frozen=True)
class TokenAxis:
    """One token axis of a map: the tokens, their display labels, ids and special-token flags."""

    tokens: list[str]
    labels: list[str]
    ids: list[int]
    special: np.ndarray


@dataclass(frozen=True)
class Target:
    """An encoder–decoder's decoder rows: what row r is fed (``tgt_*``) and what it predicts under teacher
    forcing (``out_*``); the target text given or generated; the LM head's argmax per row (None without one)."""

    fed: TokenAxis
    predicts: TokenAxis
    text: str
    predicted_ids: list[int] | None = None


def _source(attr: str, doc: str):
    return property(lambda self: getattr(self, attr) if self.target is not None else None, doc=doc)


def _target(part: str, attr: str, doc: str):
    return property(
        lambda self: getattr(getattr(self.target, part), attr) if self.target is not None else None, doc=doc
    )


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
    # encoder–decoders (None otherwise): ``tokens`` etc. are the source's (the encoder's axis, the cross maps'
    # columns); the decoder's rows are ``target``'s
    target: Target | None = None
    # the "all heads" rule (normviz.methods.keyspace.layer_view), given by the session: {per-head key: the key whose
    # layer
    # map is its view of all heads (norm → norm_layer)}; ``views``: those arrays when they are not keys asked for
    all_heads: dict[str, str] = field(default_factory=dict)
    views: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    # ---- an encoder–decoder's axes by their older names (None for other models)
    src_tokens = _source("tokens", "encoder input tokens: columns of the cross maps")
    src_labels = _source("labels", "display labels of src_tokens")
    src_ids = _source("token_ids", "ids of src_tokens")
    tgt_tokens = _target("fed", "tokens", "decoder input tokens (start token, target without its last token): rows")
    tgt_labels = _target("fed", "labels", "display labels of tgt_tokens")
    tgt_ids = _target("fed", "ids", "ids of tgt_tokens")
    tgt_special = _target("fed", "special", "special-token flags of tgt_tokens (``special`` is the source's)")
    out_tokens = _target("predicts", "tokens", "the token each decoder row predicts under teacher forcing")
    out_labels = _target("predicts", "labels", "display labels of out_tokens")
    out_ids = _target("predicts", "ids", "ids of out_tokens")
    predicted_ids = property(
        lambda self: self.target.predicted_ids if self.target is not None else None,
        doc="argmax of the LM head per decoder row (None without one)",
    )
    target_text = property(
        lambda self: self.target.text if self.target is not None else None, doc="the target given, or the one generated"
    )

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self.arrays[key]
        except KeyError:
            why = f" ({self.refused[key]})" if key in self.refused else ""
            raise UnknownKeyError(
                f"{key!r} was not computed{why}; computed map keys: {', '.join(self.arrays)}."
            ) from None

    def __contains__(self, key: str) -> bool:
        return key in self.arrays

    def keys(self) -> list[str]:
        return list(self.arrays)

    @property
    def is_encoder_decoder(self) -> bool:
        return self.target is not None

    @property
    def pair_boundary(self) -> int | None:
        """Position of a sentence pair's second segment's first token, else None (:func:`pair_boundary`)."""
        return pair_boundary(self)

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def map(self, key: str, layer: int, head: int | None = None) -> np.ndarray:
        """One [n, n] map. For per-head keys, ``head=None`` gives the layer-level view, one quantity whatever
        else was computed: the key its family declares as its "all heads" view (:attr:`all_heads`: ``norm_layer``
        for ``norm``, likewise ``encoder_norm``, ``decoder_norm``, ``cross_norm``), else the head mean
        (``attention``). Ranges are those of the key's own array (an encoder–decoder's decoder may have other
        layer and head counts than its encoder)."""
        arr = self[key]
        n_layers = arr.shape[0]
        if not -n_layers <= layer < n_layers:
            raise NormvizError(f"layer {layer} is out of range: {key} has {n_layers} layers (0…{n_layers - 1}).")
        if arr.ndim == 3:
            return arr[layer]
        if head is None:
            return self.all_heads_map(key, layer)
        n_heads = arr.shape[1]
        if not -n_heads <= head < n_heads:
            raise NormvizError(f"head {head} is out of range: {key} has {n_heads} heads (0…{n_heads - 1}).")
        return arr[layer, head]

    def all_heads_map(self, key: str, layer: int) -> np.ndarray:
        """Layer ``layer`` of per-head ``key`` with all heads: its declared view's, else the head mean."""
        view = self.all_heads.get(key)
        if view is None:
            return self[key][layer].mean(0)
        arr = self.arrays.get(view, self.views.get(view))
        if arr is None:
            why = f" ({self.refused[view]})" if view in self.refused else ""
            raise NormvizError(
                f"{key!r} with all heads is {view!r}, which was not computed{why}; ask for it "
                f"(get([{key!r}, {view!r}])) or pick one head."
            )
        return arr[layer]

    def to_npz(self, path, dtype: str | None = None) -> None:
        """Write ``tokens`` and one array per key (shapes as in the README); encoder–decoders also
        ``src_tokens`` (= ``tokens``) and ``tgt_tokens``."""
        out = {"tokens": np.array(self.tokens, dtype=str)}
        if self.is_encoder_decoder:
            out["src_tokens"] = np.array(self.src_tokens, dtype=str)
            out["tgt_tokens"] = np.array(self.tgt_tokens, dtype=str)
        for k, v in self.arrays.items():
            out[k] = v.astype(dtype) if dtype else v
        np.savez(path, **out)


def pair_boundary(analysis) -> int | None:
    """Original position of the second segment's first token of a sentence pair, or None for a single text.

    The first segment ends at the first special token that follows a non-special one (a leading [CLS]/<s>
    is skipped); the separator may be a run of specials (RoBERTa's ``</s></s>``), so the second segment
    starts at the first non-special token after that run."""
    if not getattr(analysis, "text_pair", None):
        return None
    sp = [bool(x) for x in analysis.special]
    n = len(sp)
    for i in range(1, n):
        if sp[i] and not sp[i - 1]:
            j = i
            while j < n and sp[j]:
                j += 1
            return j if j < n else None
    return None

"""The result of ``Session.explain``: a logit (difference) split exactly, two ways.

Direct parts (pre-LN stacks), through the final norm with its real scale frozen:
    embedding + heads.sum() + attn_bias.sum() + ff.sum() + final_bias == total
    (encoder–decoder decoders: + cross_heads.sum() + cross_bias.sum())
Propagated parts (every model with an LM head):
    sources.sum() + bias == total,  sources_by_layer[l].sum() + bias_by_layer[l:].sum() == total
``sources`` is computed on first access by one backward pass (about a forward pass's cost; refused with
TooCostlyError over budget); the direct parts cost about one forward pass and are refused with NotApplicableError on
post-LN stacks.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..core.errors import NotApplicableError

if TYPE_CHECKING:
    from .adjoint import Backward

DIRECT = ("heads", "attn_bias", "ff", "embedding", "final_bias", "cross_heads", "cross_bias", "ff_by_expert")


class Explanation:
    """Why token ``token`` (rather than ``foil``) at ``position``. Arrays are numpy float64."""

    def __init__(
        self,
        *,
        token: int,
        token_text: str,
        foil: int | None,
        foil_text: str | None,
        position: int,
        total: float,
        tokens: list[str],
        direct: dict | None,
        direct_refusal: str | None,
        sources: Callable[[], "Backward"],
        source_tokens: list[str] | None = None,
        n_source: int = 0,
        token_ids: list[int] | None = None,
        token_texts: list[str] | None = None,
    ):
        self.token, self.token_text, self.foil, self.foil_text = token, token_text, foil, foil_text
        self.position, self.total, self.tokens = position, float(total), list(tokens)
        # encoder–decoders: sources run over source tokens, then target tokens
        self.source_tokens = list(source_tokens) if source_tokens is not None else list(tokens)
        self.n_source = n_source
        # the ids of ``tokens`` and their readable texts (each id decoded: ' capital'), where known
        self.token_ids = list(token_ids) if token_ids is not None else None
        self.token_texts = list(token_texts) if token_texts is not None else None
        self._direct, self._direct_refusal = direct, direct_refusal
        self._sources_fn, self._sources = sources, None

    # ---- direct parts
    def _get(self, name: str):
        if self._direct is None:
            raise NotApplicableError(self._direct_refusal or "no direct parts for this model")
        if self._direct.get(name) is None:
            what = "mixtures of experts" if name == "ff_by_expert" else "encoder–decoder decoders"
            raise NotApplicableError(f"{name!r} applies to {what} only")
        return self._direct[name]

    @property
    def has_direct(self) -> bool:
        return self._direct is not None

    @property
    def direct_refusal(self) -> str | None:
        """Why the direct parts are refused (post-LN stacks), or None."""
        return None if self._direct is not None else self._direct_refusal

    heads = property(lambda self: self._get("heads"), doc="[L, H, n] head h of layer l through source token j")
    attn_bias = property(lambda self: self._get("attn_bias"), doc="[L] b^O of each layer")
    ff = property(lambda self: self._get("ff"), doc="[L] the whole FF block's output at i")
    embedding = property(lambda self: self._get("embedding"), doc="the embedding output x^0_i")
    final_bias = property(lambda self: self._get("final_bias"), doc="⟨β, u⟩ + the LM head's bias difference")
    cross_heads = property(lambda self: self._get("cross_heads"), doc="[L, H, n_src] cross block heads")
    cross_bias = property(lambda self: self._get("cross_bias"), doc="[L] cross block b^O")
    ff_by_expert = property(
        lambda self: self._get("ff_by_expert"),
        doc="[L, E] mixtures of experts: ``ff`` split by expert (a shared expert last), each "
        "chosen expert's gated output × its frozen router weight (0: not chosen); a row sums "
        "to ``ff`` up to the model's rounding; NaN rows: dense FF layers",
    )

    # ---- propagated parts (one backward pass, :mod:`normviz.attribution.adjoint`)
    def _propagated(self):
        if self._sources is None:
            self._sources = self._sources_fn()
        return self._sources

    @property
    def sources(self) -> np.ndarray:
        """[n] every input token's part carried through the whole network (encoder–decoders: source tokens,
        then target tokens)."""
        return self._propagated().sources.numpy()

    @property
    def bias(self) -> float:
        """Every bias's part, computed directly in the backward pass (Σ :attr:`bias_by_layer` +
        :attr:`encoder_bias`); total − Σ sources equals it up to the model's rounding (0 for a model without
        biases)."""
        return self._propagated().bias

    @property
    def sources_by_layer(self) -> np.ndarray:
        """[L+1, n] each token's part as carried by its residual state entering layer l (row 0 = sources,
        row L = the output, nonzero only at the explained position): ⟨g^l_j, x^l_j⟩. Every row plus the biases
        injected at or above its layer (``bias_by_layer[l:]``) is the total. Encoder–decoders: the decoder's
        layers; a source column is the encoder output's part read by the cross blocks at or above l."""
        return self._propagated().by_layer.numpy()

    @property
    def bias_by_layer(self) -> np.ndarray:
        """[L+1] the part of the biases injected in layer l (the last entry: the readout's own constant),
        computed directly in the same backward pass (encoder–decoders: + :attr:`encoder_bias`)."""
        return self._propagated().bias_by_layer.numpy()

    @property
    def encoder_bias(self) -> float:
        """Encoder–decoders: the part of the encoder's biases (inside its output e); else 0."""
        return self._propagated().encoder_bias

    # ---- export
    def to_dict(self, with_sources: bool = True) -> dict:
        """Every field as numpy arrays / numbers / strings (what ``normviz explain`` writes). ``tokens``: the
        readable texts (each token's id decoded, ' capital'), with ``vocab_tokens`` (the vocabulary's spellings,
        'Ġcapital') and ``token_ids`` beside them where the ids are known."""
        out: dict = {
            "total": self.total,
            "token": self.token,
            "token_text": self.token_text,
            "position": self.position,
            "tokens": np.array(self.tokens),
        }
        if self.token_texts is not None:  # readable: each id decoded; the vocabulary's spellings and the ids kept
            out.update(
                tokens=np.array(self.token_texts),
                vocab_tokens=np.array(self.tokens),
                token_ids=np.array(self.token_ids),
            )
        if self.foil is not None:
            out.update(foil=self.foil, foil_text=self.foil_text)
        if self.n_source:
            out["source_tokens"] = np.array(self.source_tokens)
        if self._direct is not None:
            out.update({k: v for k, v in self._direct.items() if v is not None})
        if with_sources:
            out["sources"], out["bias"] = self.sources, self.bias
            out["sources_by_layer"], out["bias_by_layer"] = self.sources_by_layer, self.bias_by_layer
        return out

    def to_json(self, **kw) -> str:
        def plain(v):
            if isinstance(v, np.ndarray):
                return v.tolist()
            if isinstance(v, np.generic):
                return v.item()
            return v

        return json.dumps({k: plain(v) for k, v in self.to_dict(**kw).items()}, ensure_ascii=False)

    def __repr__(self) -> str:
        vs = f" vs {self.foil_text!r}" if self.foil is not None else ""
        return f"Explanation({self.token_text!r}{vs} at {self.position}: total {self.total:.4f})"

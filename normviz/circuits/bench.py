"""The shipped benchmarks: one folder each under ``assets/circuits/`` (written by ``scripts/train_circuits.py``,
``train_planted.py`` or ``compile_tracr.py``)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import NormvizError
from ..core.tokens import Encoded

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "circuits"
Head = tuple[int, int]


@dataclass
class Benchmark:
    name: str
    lm: object  # normviz LoadedModel
    examples: list[tuple[list[int], int, int]]  # (ids, token, foil): token − foil after the last id
    circuit: frozenset[Head]
    edges: frozenset[tuple[Head, Head]] | None
    description: str
    roles: dict[str, list[Head]] = field(default_factory=dict)  # e.g. {"previous token": [...], "induction": [...]}
    info: dict = field(default_factory=dict)  # circuit.json's other fields (how it was found, training)

    @property
    def heads(self) -> list[Head]:
        return [(l, h) for l in range(self.lm.n_layers) for h in range(self.lm.n_heads)]

    def truth(self):
        """[L, H] booleans: the circuit on the head grid."""
        import numpy as np

        out = np.zeros((self.lm.n_layers, self.lm.n_heads), dtype=bool)
        for l, h in self.circuit:
            out[l, h] = True
        return out


def names() -> list[str]:
    """The shipped benchmarks, sorted."""
    if not ASSETS.is_dir():
        return []
    return sorted(p.name for p in ASSETS.iterdir() if (p / "circuit.json").is_file())


def encoded(lm, ids) -> Encoded:
    """Token ids as an :class:`Encoded` (tokens from the benchmark's tokenizer)."""
    ids = [int(i) for i in ids]
    tokens = lm.tokenizer.convert_ids_to_tokens(ids) if lm.tokenizer is not None else [str(i) for i in ids]
    return Encoded(ids=ids, tokens=list(tokens), labels=list(tokens), special=[False] * len(ids), dropped=0)


def _pairs(rows) -> frozenset:
    return frozenset((int(a), int(b)) for a, b in rows)


@functools.lru_cache(maxsize=8)
def load(name: str) -> Benchmark:
    """The benchmark ``name`` (:func:`names`), its model in float32 on the CPU (cached)."""
    folder = ASSETS / name
    if not (folder / "circuit.json").is_file():
        raise NormvizError(
            f"no circuit benchmark {name!r}; shipped: {', '.join(names()) or 'none'} "
            "(scripts/train_circuits.py, train_planted.py and compile_tracr.py write them)."
        )
    import torch
    import transformers as tf

    from ..models.loading import from_model

    meta = json.loads((folder / "circuit.json").read_text())
    model = tf.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
    tokenizer = tf.PreTrainedTokenizerFast.from_pretrained(folder)
    lm = from_model(model, tokenizer, name=f"circuit:{name}")
    edges = meta.get("edges")
    return Benchmark(
        name=name,
        lm=lm,
        examples=[(list(e["ids"]), int(e["token"]), int(e["foil"])) for e in meta["examples"]],
        circuit=_pairs(meta["circuit"]),
        edges=None if edges is None else frozenset((tuple(a), tuple(b)) for a, b in edges),
        description=meta["description"],
        roles={k: [tuple(x) for x in v] for k, v in meta.get("roles", {}).items()},
        info={k: v for k, v in meta.items() if k not in ("examples", "circuit", "edges", "description", "roles")},
    )

"""Benchmark models whose circuit is known, offline: the answer key for "does this attribution find the circuit
the model really uses?".

    names()              the shipped benchmarks (folders of ``assets/circuits/``)
    load(name)           a :class:`Benchmark`: ``.lm`` (a normviz LoadedModel), ``.examples`` [(ids, token, foil)]
                         (the prediction after the last id: token minus foil), ``.circuit`` {(layer, head)},
                         ``.edges`` {((layer, head), (layer, head))} where known, ``.description``
    ablated(bench, sets) the mean logit difference with each set of heads zero-ablated at once (and unchanged)
    check(bench)         the circuit's test: the share of the mean logit difference removed by ablating the
                         circuit, and by as many other heads drawn at random

Each benchmark is trained once by ``scripts/train_circuits.py`` (CPU, minutes), or compiled from a RASP program by
Tracr (``scripts/compile_tracr.py``, tracr in its own venv: ``tracr_reverse``, ``tracr_pattern``), and shipped under
``assets/circuits/<name>/``: the model and tokenizer (``save_pretrained``), ``circuit.json`` (the circuit, how it was
found, the examples, the training record). The circuit is found from what the heads do (attention patterns, the
field's usual definitions) or planted by training (``planted_induction``, ``scripts/train_planted.py``; ``ioi``,
``scripts/train_ioi.py``: a strictness loss keeps the other heads from changing the task's answers) or read from a
compiled program's RASP graph, and then verified by intervention (:func:`check`); the attribution methods are scored
against it by :mod:`normviz.trust.circuit_scores`.
"""

from __future__ import annotations

from .bench import ASSETS, Benchmark, encoded, load, names
from .check import CircuitCheck, ablated, check

__all__ = ["ASSETS", "Benchmark", "CircuitCheck", "ablated", "check", "encoded", "load", "names"]

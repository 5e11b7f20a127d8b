"""The faithfulness of every attribution over a corpus: per text (:func:`explain_text`), then per key the mean
over texts with a 95 % bootstrap interval (:func:`normviz.trust.scores.bootstrap_ci`).

    faithfulness(lm, texts, ...)  -> Faithfulness
        .texts                     one :class:`normviz.trust.attributions.Text` per text
        .spearman[key], .kendall[key]                 [texts]: against attention knockout
        .spearman_heads[key], .kendall_heads[key]     [texts]: per-head attributions against head ablation
        .spearman_layers[key]                         [texts]: per-layer maps against per-layer knockout (layers=True)
        .comprehensiveness[key], .sufficiency[key]    [texts]: AOPC (:mod:`normviz.trust.erasure`)
        .gaps[key]                                    [texts]: completeness gaps (sources, gradients)
        .summary()  rows (key, score, mean, lo, hi, n);  .table()  Markdown;  .to_csv(path)
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.errors import NormvizError
from .attributions import Text, explain_text
from .scores import bootstrap_ci

SCORES = (
    "spearman",
    "kendall",
    "spearman_heads",
    "kendall_heads",
    "spearman_layers",
    "comprehensiveness",
    "sufficiency",
    "gap",
)
MEANING = {
    "spearman": "Spearman ρ with knockout deltas over the tokens (higher: ranks tokens as cutting their routes does)",
    "kendall": "Kendall τ-b with knockout deltas over the tokens",
    "spearman_heads": "Spearman ρ with head-ablation deltas over the L·H heads",
    "kendall_heads": "Kendall τ-b with head-ablation deltas over the L·H heads",
    "spearman_layers": "per-layer maps: Spearman ρ of layer l's row with knocking out each edge in layer l only, "
    "mean over layers (the ground truth for one layer's mixing)",
    "comprehensiveness": "AOPC comprehensiveness: score lost when its top tokens are replaced (higher: better)",
    "sufficiency": "AOPC sufficiency: score lost when all but its top tokens are replaced (lower: better)",
    "gap": "completeness gap: the score minus the attribution's sum (0: exact)",
}


@dataclass
class Faithfulness:
    model: str
    texts: list[Text]
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (line index, why) of texts not scored
    seconds: float = 0.0
    settings: dict = field(default_factory=dict)

    def _per_text(self, name: str) -> dict[str, np.ndarray]:
        keys = list(dict.fromkeys(k for t in self.texts for k in self._of(t, name)))
        return {k: np.array([self._of(t, name).get(k, np.nan) for t in self.texts], dtype=np.float64) for k in keys}

    @staticmethod
    def _of(t: Text, name: str) -> dict[str, float]:
        if name in ("comprehensiveness", "sufficiency"):
            return {k: v[name] for k, v in t.aopc.items()}
        if name == "gap":
            return t.gaps
        return getattr(t, name)

    spearman = property(lambda self: self._per_text("spearman"))
    kendall = property(lambda self: self._per_text("kendall"))
    spearman_heads = property(lambda self: self._per_text("spearman_heads"))
    spearman_layers = property(lambda self: self._per_text("spearman_layers"))
    kendall_heads = property(lambda self: self._per_text("kendall_heads"))
    comprehensiveness = property(lambda self: self._per_text("comprehensiveness"))
    sufficiency = property(lambda self: self._per_text("sufficiency"))
    gaps = property(lambda self: self._per_text("gap"))

    def summary(self) -> list[dict]:
        """One row per (key, score): mean over texts, 95 % bootstrap interval, texts counted."""
        rows = []
        for name in SCORES:
            for key, values in self._per_text(name).items():
                mean, lo, hi, n = bootstrap_ci(values)
                rows.append({"key": key, "score": name, "mean": mean, "lo": lo, "hi": hi, "n": n})
        return rows

    def table(
        self,
        scores=("spearman", "kendall", "comprehensiveness", "sufficiency", "spearman_heads", "spearman_layers", "gap"),
    ) -> str:
        """Markdown: keys × scores, "mean [lo, hi]", keys by Spearman (best first)."""
        cells = {(r["key"], r["score"]): r for r in self.summary()}
        order = sorted(
            {r["key"] for r in cells.values()},
            key=lambda k: -np.nan_to_num(cells.get((k, "spearman"), {}).get("mean", np.nan), nan=-9),
        )
        shown = [s for s in scores if any((k, s) in cells for k in order)]

        def cell(k, s):
            r = cells.get((k, s))
            if r is None or not np.isfinite(r["mean"]):
                return "—"
            if not np.isfinite(r["lo"]):
                return f"{r['mean']:.3f}"
            return f"{r['mean']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"

        lines = ["| attribution | " + " | ".join(shown) + " |", "|---|" + "---|" * len(shown)]
        lines += ["| " + k + " | " + " | ".join(cell(k, s) for s in shown) + " |" for k in order]
        return "\n".join(lines)

    def to_csv(self, path) -> None:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=["key", "score", "mean", "lo", "hi", "n"])
            w.writeheader()
            w.writerows(self.summary())

    def per_text_csv(self, path) -> None:
        """One row per (text, key): the text's scores."""
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["text", "key", *SCORES])
            for index, t in enumerate(self.texts):
                keys = dict.fromkeys(k for name in SCORES for k in self._of(t, name))
                for k in keys:
                    w.writerow([index, k, *(self._of(t, name).get(k, "") for name in SCORES)])


SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "trust"


def shipped(model: str) -> list[dict] | None:
    """The summary rows of the shipped corpus run for ``model`` (assets/trust/<model>.csv, written by
    ``normviz faithfulness``), or None when none is shipped."""
    path = SHIPPED / f"{model}.csv"
    if not path.is_file():
        return None
    with open(path, newline="", encoding="utf-8") as fh:
        return [
            {**r, "mean": float(r["mean"]), "lo": float(r["lo"]), "hi": float(r["hi"]), "n": int(r["n"])}
            for r in csv.DictReader(fh)
        ]


def shipped_about(model: str) -> str | None:
    """What the shipped corpus run for ``model`` scored (assets/trust/<model>.txt: the texts, the prediction,
    the interventions, when), or None when none is said."""
    path = SHIPPED / f"{model}.txt"
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def faithfulness(
    lm,
    texts,
    keys=None,
    token=None,
    foil=None,
    *,
    max_tokens: int | None = None,
    heads: bool | int = True,
    gradients: bool = True,
    ig_steps: int = 32,
    erase: bool = True,
    options: dict | None = None,
    progress=None,
    checkpoint=None,
    every: int = 20,
    foil_rule: str | None = None,
    first_index: int = 0,
    skip=(),
    on_text=None,
    layers: bool = False,
) -> Faithfulness:
    """Score every attribution of each text's prediction against the interventions (module docstring).
    ``max_tokens`` truncates each text (its prediction is then at the cut); ``heads``: head ablation for every
    text (True), none (False) or the first N texts (an int: it costs L·H passes a text); a text refused (too costly, too
    short) is listed in ``.skipped`` with why, never silently dropped. ``checkpoint(partial)`` is called with the
    texts done so far every ``every`` texts (a long run's results survive its interruption). ``foil_rule``
    "runner-up": each text's foil is its own runner-up candidate (:func:`explain_text`). ``first_index``: the
    corpus index of ``texts[0]`` (a shard's offset): the ``random`` baseline is seeded by the corpus index, so a
    sharded run scores what one process scores. ``skip``: indices of ``texts`` not scored here (done by an
    earlier run being resumed); ``on_text(index, text, why)`` after each text scored (``text``) or refused
    (``why``): where a caller keeps each result as it comes (the CLI appends it to its run's file)."""
    import warnings

    from ..core.errors import TruncationWarning
    from ..session.session import Session

    start, out, skipped = time.perf_counter(), [], []
    texts = list(texts)
    skip = set(skip)
    for index, text in enumerate(texts):
        if index in skip:
            continue
        done, why = None, None
        try:
            with warnings.catch_warnings():  # the cut is the setting max_tokens, stated in .settings
                warnings.simplefilter("ignore", TruncationWarning)
                s = Session(lm, text, max_tokens=max_tokens, options=options)
            if len(s.encoded.ids) < 3:
                raise NormvizError("fewer than 3 tokens: nothing to rank")
            with_heads = heads if isinstance(heads, bool) else index < int(heads)
            done = explain_text(
                s,
                keys,
                token,
                foil,
                heads=with_heads,
                gradients=gradients,
                ig_steps=ig_steps,
                erase=erase,
                seed=first_index + index,
                foil_rule=foil_rule,
                layers=layers,
            )
            out.append(done)
        except NormvizError as exc:
            why = str(exc)
            skipped.append((index, why))
        if on_text is not None:
            on_text(index, done, why)
        if progress is not None:
            progress((index + 1) / len(texts), f"text {index + 1}/{len(texts)}")
        if checkpoint is not None and (index + 1) % every == 0 and index + 1 < len(texts):
            checkpoint(_result(lm, out, skipped, start, locals()))
    return _result(lm, out, skipped, start, locals())


def _result(lm, out, skipped, start, args) -> Faithfulness:
    return Faithfulness(
        model=lm.name,
        texts=list(out),
        skipped=list(skipped),
        seconds=time.perf_counter() - start,
        settings={
            k: args[k]
            for k in ("max_tokens", "heads", "gradients", "ig_steps", "erase", "token", "foil", "foil_rule", "layers")
        },
    )

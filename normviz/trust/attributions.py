"""One text: the ground truth by intervention and every attribution of the same prediction, as vectors over the
source tokens j (and over heads), with their scores.

Per-token attributions of the prediction at position i:
    sources                 Session.explain's exact parts of the logit (every token carried through every layer)
    direct_heads            Σ_{l,h} of the direct head parts heads[l, h, j] (pre-LN models): the heads' direct path
    <map key>               the last layer's row i of the map (head-averaged for per-head maps): for a rollout
                            the whole network's mixing, for a per-layer map only the last layer's
    input_x_gradient, integrated_gradients   :mod:`normviz.attribution.gradients` (completeness gaps stated)
    random                  uniform noise (seeded per text): what a score looks like by chance
Per-head attributions [L, H]: direct_heads (Σ_j heads[l, h, j]), against head ablation.

Scores (each against the ground truth over the positions j that can reach i through an edge knockout cuts:
j ≠ i, and j < i on a causal model): Spearman, Kendall; and AOPC (:mod:`.erasure`) for every per-token one.
The question matters: knockout measures whether a token's route is *necessary* for the prediction; an exact
decomposition (sources) measures what the token's vector *carries* into it. A token can carry much and be
replaceable (another route carries the same), or carry little yet gate others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..attribution import gradients as grad
from ..attribution.knockout import Intervention, InterventionTarget, ablate_heads, knockout
from ..core.errors import NormvizError
from ..methods.keyspace import all_keys, key_info
from . import erasure
from .scores import kendall, spearman

FOIL_RULES = ("runner-up",)  # runner-up: the foil is the unchanged model's best candidate but the token
SKIPPED_KEYS = ("flow",)  # opt-in and costly (max-flow per layer): ask for it by name
RANDOM = "random"


def default_keys(lm) -> list[str]:
    """Every map key of the model's one stack except :data:`SKIPPED_KEYS`."""
    return [k for k in all_keys(lm) if k not in SKIPPED_KEYS]


def target_position(session) -> int:
    """The position whose prediction is explained: the first mask token of an encoder's text (fill-mask), else
    position 0 for an encoder ([CLS]); the last position of a decoder (its next token)."""
    lm = session.lm
    if lm.spec.causal:
        return len(session.encoded.ids) - 1
    mask = getattr(lm.tokenizer, "mask_token_id", None)
    ids = session.encoded.ids
    return ids.index(mask) if mask is not None and mask in ids else 0


def scored_positions(session, i: int) -> np.ndarray:
    n = len(session.encoded.ids)
    return np.array([j for j in range(n) if j != i and (j < i or not session.lm.spec.causal)], dtype=int)


@dataclass
class Text:
    """One text's ground truth, attributions and scores (module docstring)."""

    tokens: list[str]
    position: int
    token_text: str | None
    foil_text: str | None
    measure: str
    total: float
    knockout: Intervention
    head_ablation: Intervention | None
    attributions: dict[str, np.ndarray]  # key -> [n]
    head_attributions: dict[str, np.ndarray]  # key -> [L, H]
    gaps: dict[str, float]  # key -> completeness gap (exact decompositions and gradients)
    baselines: dict[str, str]  # what each erasure / gradient baseline is
    scored: np.ndarray  # the positions j the correlations run over
    spearman: dict[str, float] = field(default_factory=dict)
    kendall: dict[str, float] = field(default_factory=dict)
    spearman_heads: dict[str, float] = field(default_factory=dict)
    kendall_heads: dict[str, float] = field(default_factory=dict)
    spearman_layers: dict[str, float] = field(default_factory=dict)  # per-layer maps vs per-layer knockout
    layer_knockout: np.ndarray | None = None  # [L, n, n]: the prediction's row i only (others nan)
    aopc: dict[str, dict[str, float]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def rows(self) -> list[dict]:
        """One row per attribution: its scores against the ground truth, best Spearman first (random last)."""
        out = []
        for key in self.attributions:
            aopc = self.aopc.get(key, {})
            out.append(
                {
                    "attribution": key,
                    "spearman": self.spearman.get(key),
                    "kendall": self.kendall.get(key),
                    "comprehensiveness": aopc.get("comprehensiveness"),
                    "sufficiency": aopc.get("sufficiency"),
                    "spearman_heads": self.spearman_heads.get(key),
                    "spearman_layers": self.spearman_layers.get(key),
                    "gap": self.gaps.get(key),
                }
            )
        return sorted(
            out, key=lambda r: (r["attribution"] == RANDOM, -(r["spearman"] if r["spearman"] == r["spearman"] else -9))
        )


def _row(array: np.ndarray, per_head: bool, i: int) -> np.ndarray:
    last = array[-1]
    return np.asarray(last[:, i, :].mean(0) if per_head else last[i, :], dtype=np.float64)


ACCUMULATED = ("globenc", "decompx", "flow")  # whole-network maps (layer l: the mixing up to l), like the rollouts


def per_layer_keys(keys, analysis) -> list[str]:
    """The keys whose maps are one layer's mixing ([L, n, n] or [L, H, n, n], not a rollout's product)."""
    return [
        k
        for k in keys
        if k in analysis and "rollout" not in k and k not in ACCUMULATED and np.asarray(analysis[k]).ndim in (3, 4)
    ]


def layer_scores(session, analysis, keys, lk: np.ndarray, i: int, scored: np.ndarray) -> dict[str, float]:
    """Per key: the mean over layers of Spearman(map[l, i, j], lk[l, i, j]) over the scored j (layers where
    either is constant left out)."""
    out = {}
    for key in per_layer_keys(keys, analysis):
        a = np.asarray(analysis[key], dtype=np.float64)
        rows = a[:, :, i, :].mean(1) if a.ndim == 4 else a[:, i, :]
        per = [spearman(rows[l, scored], lk[l, i, scored]) for l in range(lk.shape[0])]
        out[key] = float(np.nanmean(per)) if np.isfinite(per).any() else float("nan")
    return out


def explain_text(
    session,
    keys=None,
    token=None,
    foil=None,
    position: int | None = None,
    *,
    heads: bool = True,
    gradients: bool = True,
    ig_steps: int = 32,
    erase: bool = True,
    seed: int = 0,
    baseline_id: int | None = None,
    foil_rule: str | None = None,
    layers: bool = False,
) -> Text:
    """The ground truth and every attribution of one prediction of ``session`` (module docstring); position
    None: :func:`target_position`. ``baseline_id``: the token of the integrated-gradients and erasure baselines
    (None: :func:`normviz.attribution.gradients.baseline_token`'s pad / unk / eos). ``foil_rule`` "runner-up" (with
    ``foil`` None): every score is the logit difference to the unchanged model's best candidate but the token.
    Keys refused (cost, architecture) are listed in ``Text.refused``. ``layers``: also knock out each edge into row
    i in each layer alone (:func:`normviz.trust.layer_knockout.layer_knockout`, L·i more passes) and score every
    per-layer map against it (``Text.spearman_layers``)."""
    lm, seconds, refused = session.lm, {}, {}
    i = target_position(session) if position is None else position
    clock = time.perf_counter()
    if foil_rule is not None and (foil_rule not in FOIL_RULES or foil is not None):
        raise NormvizError(
            f"foil_rule must be one of {', '.join(FOIL_RULES)} with no foil given, got {foil_rule!r} (foil {foil!r})."
        )
    t = InterventionTarget(session, token, foil, i)
    if foil_rule == "runner-up" and t.readout is not None:
        t = InterventionTarget(session, t.token, t.runner_up, t.i)
    i = t.i
    ko = knockout(session, target=t)
    seconds["knockout"] = time.perf_counter() - clock
    ha = None
    if heads:
        clock = time.perf_counter()
        try:
            ha = ablate_heads(session, target=t)
        except NormvizError as exc:
            refused["head_ablation"] = str(exc)
        seconds["head_ablation"] = time.perf_counter() - clock
    attributions, head_attributions, gaps, baselines = {}, {}, {}, {}
    if t.readout is not None:
        clock = time.perf_counter()
        try:
            e = session.explain(t.token, t.foil, i)
            attributions["sources"] = np.asarray(e.sources, dtype=np.float64)
            gaps["sources"] = t.total - float(e.sources.sum() + e.bias)
            if e.has_direct:
                attributions["direct_heads"] = e.heads.sum((0, 1))
                head_attributions["direct_heads"] = e.heads.sum(-1)
        except NormvizError as exc:
            refused["sources"] = str(exc)
        seconds["sources"] = time.perf_counter() - clock
    clock = time.perf_counter()
    keys = default_keys(lm) if keys is None else list(keys)
    analysis = session.get(keys, strict=False)
    for key in keys:
        if key in analysis:
            attributions[key] = _row(analysis[key], key_info(key).per_head, i)
        else:
            refused[key] = analysis.refused.get(key, "not computed")
    seconds["maps"] = time.perf_counter() - clock
    if gradients:
        clock = time.perf_counter()
        fn = grad.ScoreFunction(lm, t.readout, t.encoded, i, t.token, t.foil)
        for g in (
            grad.input_x_gradient(fn, t.batch_tokens),
            grad.integrated_gradients(fn, *grad.baseline_token(lm.tokenizer, baseline_id), ig_steps, t.batch_tokens),
        ):
            attributions[g.name], gaps[g.name], baselines[g.name] = g.values, g.gap, g.baseline
        seconds["gradients"] = time.perf_counter() - clock
    rng = np.random.default_rng(seed)
    attributions[RANDOM] = rng.random(len(session.encoded.ids))
    out = Text(
        tokens=list(session.tokens),
        position=i,
        token_text=ko.token_text,
        foil_text=ko.foil_text,
        measure=ko.measure,
        total=ko.total,
        knockout=ko,
        head_ablation=ha,
        attributions=attributions,
        head_attributions=head_attributions,
        gaps=gaps,
        baselines=baselines,
        scored=scored_positions(session, i),
        refused=refused,
        seconds=seconds,
    )
    for key, values in attributions.items():
        out.spearman[key] = spearman(values[out.scored], ko.delta[out.scored])
        out.kendall[key] = kendall(values[out.scored], ko.delta[out.scored])
    if ha is not None:
        for key, values in head_attributions.items():
            out.spearman_heads[key] = spearman(values, ha.delta)
            out.kendall_heads[key] = kendall(values, ha.delta)
        out.spearman_heads[RANDOM] = spearman(rng.random(ha.delta.shape), ha.delta)
        out.kendall_heads[RANDOM] = kendall(rng.random(ha.delta.shape), ha.delta)
    if layers:
        from .layer_knockout import layer_knockout

        clock = time.perf_counter()
        try:
            out.layer_knockout = layer_knockout(session, target=t, rows=[i])
            out.spearman_layers = layer_scores(session, analysis, keys, out.layer_knockout, i, out.scored)
            out.spearman_layers[RANDOM] = float(
                np.nanmean(
                    [
                        spearman(rng.random(out.scored.size), out.layer_knockout[l, i, out.scored])
                        for l in range(lm.n_layers)
                    ]
                )
            )
        except NormvizError as exc:
            refused["layer_knockout"] = str(exc)
        seconds["layer_knockout"] = time.perf_counter() - clock
    if erase:
        clock = time.perf_counter()
        bid, btext = grad.baseline_token(lm.tokenizer, baseline_id)
        baselines["erasure"] = f"{btext!r} (id {bid}) in place of each removed token"
        out.aopc = erasure.aopc(t, {**attributions, "knockout": ko.delta}, bid)  # knockout: its own ranking
        seconds["erasure"] = time.perf_counter() - clock
    return out

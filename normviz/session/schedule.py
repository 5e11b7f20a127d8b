"""Which family computes which of a ``get()``'s keys, in what order, and where
(:class:`normviz.session.session.Session`).

    todo keys ─► ready (their requirements computed) ─► grouped by (stack, family), in stack and registry order
              ─► + the family's free siblings (COMPUTED_TOGETHER) ─► one compute() per group: here, or in the
                 heavy-methods worker (normviz.workers.process), under the model's lock when it reruns the shared model
              ─► keys whose requirement was refused are refused too; repeat until nothing is pending

A pass may stop after the last attention block when every family asked for reads only the attention blocks
(``Family.record == "attention"``): the last layer's FF block and the final norm are then not run.
"""

from __future__ import annotations

from typing import Callable

from .. import methods as registry
from ..core.errors import NormvizError, NotApplicableError, TooCostlyError
from ..methods import keyspace
from ..methods.base import Inputs
from ..record.recorder import model_lock
from . import map_budget

Progress = Callable[[float, str], None]


def refuse_dependent(key: str, refused: dict) -> bool:
    """Refuse ``key`` (in place) when a key it requires was refused; True if so."""
    stack, base = keyspace.parse(key)
    blocked = next(
        (keyspace.spell(stack, r) for r in registry.requires(base) if keyspace.spell(stack, r) in refused), None
    )
    if blocked is None:
        return False
    refused[key] = type(refused[blocked])(f"needs {blocked!r}: {refused[blocked]}")
    return True


def plan(session, wanted: list[str], strict: bool) -> tuple[list[str], dict[str, NormvizError]]:
    """(the keys to compute, the refused {key: why}) of a ``get()`` of the spelled keys ``wanted``, before anything
    runs: the memory budget, each key's check (applicability, cost), refused requirements; ``strict``: the first
    refusal raised. Each per-head key's "all heads" view (:func:`normviz.methods.keyspace.layer_view`) comes with it, so
    that ``Analysis.map`` gives that one quantity; a view refused only leaves ``Analysis.map`` without it (it
    says so), never refuses the key."""
    refused: dict[str, NormvizError] = map_budget.over_budget(session, wanted, strict)
    _refuse_unfit(session, wanted, refused)
    if strict and refused:
        raise next(iter(refused.values()))
    views = [
        v
        for v in dict.fromkeys(filter(None, map(keyspace.layer_view, wanted)))
        if v not in wanted and v not in session.store.arrays
    ]
    unfit = map_budget.over_budget(session, [k for k in wanted if k not in refused] + views, False)
    unfit = {v: unfit[v] for v in views if v in unfit}
    _refuse_unfit(session, views, unfit)
    return [k for k in wanted + views if k not in session.store.arrays and k not in refused and k not in unfit], refused


def _refuse_unfit(session, keys: list[str], refused: dict) -> None:
    """Put each of ``keys`` that its check (applicability, cost) or a refused requirement refuses into ``refused``."""
    for k in keys:
        if k in session.store.arrays or k in refused or refuse_dependent(k, refused):
            continue
        try:
            stack, key = keyspace.parse(k)
            keyspace.check(session.lm, stack, key, session.request_of(stack), session.options)
        except (TooCostlyError, NotApplicableError) as exc:
            refused[k] = exc


def free_siblings(session, stack: str, family, ks: list[str]) -> list[str]:
    """A family that declares COMPUTED_TOGETHER computes its other keys in the same pass at little extra cost
    (the norm family's stages share the Grams, the FF stages the per-pair vectors): they are kept, so asking for
    them later computes nothing. Option ``compute_together=False`` (the corpus engine, which knows what it needs)
    computes only the keys asked for."""
    if not family.computed_together or not session.options.get("compute_together", True):
        return []
    out = []
    for info in family.keys:
        k = keyspace.spell(stack, info.key)
        if (
            k in ks
            or k in session.store.arrays
            or stack not in info.stacks
            or registry.is_opt_in(info.key)
            or session.refusal(k) is not None
            or map_budget.over_budget(session, ks + out + [k], False)
        ):
            continue
        out.append(k)
    return out


def compute(session, todo: list[str], refused: dict, strict: bool, progress: Progress | None) -> None:
    """Compute the spelled keys ``todo`` into ``session.store.arrays`` (their checks passed); a family's refusal is
    raised (``strict``) or put into ``refused`` with the keys that need it."""
    order = list(registry.families())
    parsed = {k: keyspace.parse(k) for k in todo}

    def group(k):  # (stack, family name)
        stack, key = parsed[k] if k in parsed else keyspace.parse(k)
        return stack, registry.family_of(key).name

    steps = len({group(k) for k in todo})
    done_steps = 0

    def reporter(stack: str):
        prefix = "" if stack == "model" else f"{stack}: "

        def report(fraction: float, message: str) -> None:
            if progress:
                progress(min(1.0, (done_steps + fraction) / max(steps, 1)), prefix + message)

        return report

    full = not (
        session.options.get("stop_early", True)
        and all(registry.families()[group(k)[1]].record == "attention" for k in todo)
    )

    def views_of(stack: str):
        def layer_views():
            if stack not in session.store.views and progress:
                progress(done_steps / max(steps, 1), "forward pass")
            return session.layers(stack, full, alpha=(stack, "attention") in parsed.values())

        return layer_views

    pending = list(todo)
    while pending:
        ready = [
            k
            for k in pending
            if all(keyspace.spell(parsed[k][0], r) in session.store.arrays for r in registry.requires(parsed[k][1]))
        ]
        if not ready:
            raise RuntimeError(f"map keys {pending} wait on keys that were not computed")
        groups: dict[tuple[str, str], list[str]] = {}
        for k in sorted(ready, key=lambda k: (session.stacks.index(parsed[k][0]), order.index(group(k)[1]))):
            groups.setdefault(group(k), []).append(k)
        for (name, fam), ks in groups.items():
            family = registry.families()[fam]
            stack = session.stack(name)
            ks = ks + free_siblings(session, name, family, ks)
            base = [stack.own(k) for k in ks]
            arrays = {stack.own(k): v for k, v in session.store.arrays.items() if stack.holds(k)}
            report = reporter(name)
            inputs = Inputs(
                request=stack.request,
                layer_views=views_of(name),
                arrays=arrays,
                model=stack.model if family.needs_model else None,
                progress=report,
            )
            try:
                out = run_family(session, stack, family, inputs, ks, report)
            except NormvizError as exc:
                if strict:
                    raise
                refused.update({k: exc for k in ks})
                out = None
            if out is not None:
                missing = [k for k in base if k not in out.arrays]
                if missing:
                    raise RuntimeError(f"family {fam} did not return {missing}")
                session.store.arrays.update({stack.spell(k): out.arrays[k] for k in base})
                session.store.notes.update({stack.spell(k): v for k, v in out.notes.items() if k in base})
            done_steps += 1
        for k in pending:  # keys whose requirement failed are refused too
            if k not in refused:
                refuse_dependent(k, refused)
        pending = [k for k in pending if k not in session.store.arrays and k not in refused]
    for views in session.store.views.values():
        for v in views:
            v.clear()


def run_family(session, stack: keyspace.Stack, family, inputs: Inputs, spelled: list[str], report: Progress):
    """One family's keys of one stack (``spelled``; the Output is keyed by the stack's own names): in the
    heavy-methods worker when the session has one that takes them (:mod:`normviz.workers.process`, which rebuilds the
    session from :attr:`Session.inputs` and computes the spelled keys), else here. A family that reruns the shared
    model with hooks that do not keep to their own thread (no ``HOOKS_OWN_THREAD``) holds the model's lock
    meanwhile."""
    ks = [stack.own(k) for k in spelled]
    worker = session.worker
    if worker is not None and worker.takes(session, family, spelled):
        out = worker.compute(session, family, spelled, report)
        out.arrays = {stack.own(k): v for k, v in out.arrays.items()}
        out.notes = {stack.own(k): v for k, v in out.notes.items()}
        return out
    if inputs.model is not None and not family.hooks_own_thread:
        with model_lock(session.lm.model):
            return family.compute(inputs, ks, session.options)
    return family.compute(inputs, ks, session.options)

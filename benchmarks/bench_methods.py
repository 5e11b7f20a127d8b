"""Cost of every map family relative to the forward pass, in one run.

    python benchmarks/bench_methods.py [--model minilm] [--tokens 32] [--repeat 3] [--maps KEY|FAMILY ...] [--markdown]

The forward pass is the recording pass of :func:`normviz.record.recorder.record` (one pass, attentions on). Each
family's ``compute`` is timed on its own, on fresh per-layer views of the same records (so shared derived
quantities such as head vectors count for each family), given the maps it requires. Each figure is the
best of ``--repeat`` runs; a refused family (its ``check``) is reported as refused.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

import normviz  # noqa: E402
from normviz.core.errors import TooCostlyError, TruncationWarning  # noqa: E402
from normviz.core.tokens import Encoded, pad_batch  # noqa: E402
from normviz.methods import registry  # noqa: E402
from normviz.methods.base import Inputs  # noqa: E402
from normviz.record.recorder import record  # noqa: E402
from normviz.session.session import Session, resolve_keys  # noqa: E402

TEXT = (
    "The quick brown fox jumps over the lazy dog while the small grey cat quietly watches from the old wooden "
    "fence near the wide river bank on a sunny day in the early spring of a quiet year"
)


def encode_exactly(lm, n: int) -> Encoded:
    """The text repeated and truncated to n tokens (special tokens kept where the model adds them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        return normviz.core.tokens.encode(lm.tokenizer, " ".join([TEXT] * 8), None, max_length=n)


def best(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run(model: str, n_tokens: int, repeat: int, maps: list[str] | None, options: dict) -> list[tuple]:
    lm = normviz.load(model)
    enc = encode_exactly(lm, n_tokens)
    ids, mask = pad_batch([enc])
    t_fwd = best(lambda: record(lm, ids, mask), 3 * repeat)  # the reference: more tries on a busy machine
    session = Session.from_encoded(lm, [enc], options=options)[0]
    names = maps or list(registry.families())
    placement = lm.spec.placement
    wanted = resolve_keys(
        lm,
        [
            k
            for name in names
            for k in (
                [i.key for i in registry.families()[name].keys if placement in i.placements]
                if name in registry.families()
                else [name]
            )
        ],
    )
    request = session.request
    rows = [("forward pass", "", t_fwd)]
    arrays: dict = {}
    for name, family in registry.families().items():
        keys = [k for k in wanted if registry.family_of(k) is family]
        if not keys:
            continue
        try:
            for k in keys:
                registry.check(request, k, options)
        except TooCostlyError as exc:  # a refusal is a result too (e.g. flow on 30 layers)
            rows.append((name, f"{', '.join(keys)} — refused: {str(exc).split('(')[0].strip()}", float("nan")))
            continue
        for k in keys:  # what the family requires, computed once outside the timing
            for req in registry.requires(k):
                if req not in arrays:
                    arrays[req] = session.get([req])[req]
        inputs = Inputs(
            request=request,
            layer_views=session.layers,
            arrays=dict(arrays),
            model=lm if getattr(family, "NEEDS_MODEL", False) else None,
        )
        with torch.no_grad():
            t = best(lambda: family.compute(inputs, keys, options), repeat)
            arrays.update(family.compute(inputs, keys, options).arrays)
        rows.append((name, ", ".join(keys), t))
    return [(name, keys, t, t / t_fwd) for name, keys, t in rows], lm, len(enc.ids)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="minilm")
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--maps",
        "--methods",
        dest="maps",
        nargs="*",
        default=None,
        help="map keys or family names (default: every family)",
    )
    p.add_argument("--markdown", action="store_true", help="print a markdown table")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows, lm, n = run(args.model, args.tokens, args.repeat, args.maps, {})
    head = (
        f"{args.model}: {lm.n_layers} layers × {lm.n_heads} heads, n = {n} tokens, {lm.dtype}, {lm.device}, "
        f"torch threads {torch.get_num_threads()}, {platform.processor() or platform.machine()}; best of {args.repeat}"
    )
    if args.markdown:
        print(head + "\n")
        print("| family | map keys | ms | × forward |")
        print("|---|---|---:|---:|")
        for name, keys, t, ratio in rows:
            print(f"| {name} | {keys} | {t * 1e3:.1f} | {ratio:.2f} |")
    else:
        print(head)
        for name, keys, t, ratio in rows:
            print(f"{name:24s} {t * 1e3:10.1f} ms {ratio:9.2f} ×   {keys}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

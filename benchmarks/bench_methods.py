"""Cost of every registered map method relative to the forward pass, in one run.

    python benchmarks/bench_methods.py [--model minilm] [--tokens 32] [--repeat 3] [--methods ...] [--markdown]

The forward pass is the recording pass of :func:`normviz.record.record` (one pass, attentions on).
Layer methods are timed over all layers on fresh per-layer contexts (so shared cached quantities such as
head vectors count for each method); model methods (rollouts, flow) are timed on their own, given the
per-layer arrays they need. Each figure is the best of ``--repeat`` runs.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import normviz  # noqa: E402
from normviz.analysis import Analysis, _plan, resolve_keys  # noqa: E402
from normviz.decompose import LayerDecomposition  # noqa: E402
from normviz.errors import TooCostlyError, TruncationWarning  # noqa: E402
from normviz.methods import registry  # noqa: E402
from normviz.record import record  # noqa: E402
from normviz.tokens import Encoded, pad_batch  # noqa: E402

TEXT = ("The quick brown fox jumps over the lazy dog while the small grey cat quietly watches from the old wooden "
        "fence near the wide river bank on a sunny day in the early spring of a quiet year")


def encode_exactly(lm, n: int) -> Encoded:
    """The text repeated and truncated to n tokens (special tokens kept where the model adds them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        return normviz.tokens.encode(lm.tokenizer, " ".join([TEXT] * 8), None, max_length=n)


def best(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def contexts(lm, records):
    out = []
    for index, rec in enumerate(records):
        ctx = LayerDecomposition(rec, lm.layer_params(index), lm.spec.placement)
        ctx.index, ctx.lm = index, lm
        out.append(ctx)
    return out


def run(model: str, n_tokens: int, repeat: int, methods: list[str] | None, options: dict) -> list[tuple]:
    lm = normviz.load(model)
    enc = encode_exactly(lm, n_tokens)
    ids, mask = pad_batch([enc])
    t_fwd = best(lambda: record(lm, ids, mask), 3 * repeat)  # the reference: more tries on a busy machine
    records = record(lm, ids, mask)[0]
    names = methods or list(registry.methods())
    rows = [("forward pass", "", t_fwd)]
    keys_all = resolve_keys(lm, [k for name in names for k in
                                 ([i.key for i in registry.methods()[name].keys if lm.spec.placement in i.placements])])
    layer_methods, model_methods = _plan(keys_all)
    arrays = {}
    with torch.no_grad():
        for name, keys in layer_methods.items():
            method = registry.methods()[name]

            def go():
                per = {k: [] for k in keys}
                for ctx in contexts(lm, records):
                    out = method.compute(ctx, keys, options)
                    for k in keys:
                        per[k].append(out[k])
                return per

            t = best(go, repeat)
            per = go()
            for k in keys:
                arrays[k] = torch.stack(per[k]).cpu().numpy()
            rows.append((name, ", ".join(keys), t))
    info = Analysis(model_name=model, model_type=lm.model_type, placement=lm.spec.placement, tokens=enc.tokens,
                    labels=enc.labels, token_ids=enc.ids, special=np.array(enc.special), arrays=arrays,
                    n_layers=lm.n_layers, n_heads=lm.n_heads, dtype=str(lm.dtype), device=str(lm.device), text=TEXT)
    for name, keys in model_methods.items():
        method = registry.methods()[name]
        try:
            t = best(lambda: method.compute(arrays, info, keys, options), repeat)
        except TooCostlyError as exc:  # a refusal is a result too (e.g. flow on 30 layers)
            rows.append((name, f"{', '.join(keys)} — refused: {str(exc).split('(')[0].strip()}", float("nan")))
            continue
        arrays.update(method.compute(arrays, info, keys, options))
        rows.append((name, ", ".join(keys), t))
    return [(name, keys, t, t / t_fwd) for name, keys, t in rows], lm, len(enc.ids)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="minilm")
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--methods", nargs="*", default=None, help="method names (default: every registered method)")
    p.add_argument("--markdown", action="store_true", help="print a markdown table")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows, lm, n = run(args.model, args.tokens, args.repeat, args.methods, {})
    head = (f"{args.model}: {lm.n_layers} layers × {lm.n_heads} heads, n = {n} tokens, {lm.dtype}, {lm.device}, "
            f"torch threads {torch.get_num_threads()}, {platform.processor() or platform.machine()}; best of {args.repeat}")
    if args.markdown:
        print(head + "\n")
        print("| method | keys | ms | × forward |")
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

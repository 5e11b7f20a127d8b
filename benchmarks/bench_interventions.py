"""The ground truths' cost against one plain forward pass, and the pre-flight's estimate beside it (issue 31).

    python benchmarks/bench_interventions.py [--models smollm2 minilm] [--tokens 16 64 256] [--repeat 3]

For each model and length n, alternated in one process (:func:`benchmarks.timing.alternate`), medians of
``--repeat``:
  forward    the model's own plain forward pass (no attentions kept): the baseline
  knockout   a FRESH session + ``Session.knockout()`` (n + 1 passes' worth, batched)
  heads      a FRESH session + ``Session.ablate_heads()`` (L·H + 1 passes' worth, batched)
and the seconds the families' cost model estimates for the same request (``methods.cost.estimate_s`` at the
device's rate), so a reader sees how far the pre-flight is from the measured time. Prints the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from bench_methods import TEXT  # noqa: E402
from timing import alternate  # noqa: E402

import normviz  # noqa: E402
from normviz.methods import head_ablation, knockout  # noqa: E402
from normviz.methods.cost import estimate_s  # noqa: E402
from normviz.session.session import Session  # noqa: E402


def estimates(session) -> dict[str, float | None]:
    """The cost model's seconds for knockout (n + 1 passes) and head ablation (L·H + 1 passes)."""
    req = session.request
    one = knockout.forward_flops(req)
    return {
        "knockout": estimate_s(req, session.options, knockout.FAMILY.budget, (req.n_tokens + 1) * one),
        "heads": estimate_s(req, session.options, head_ablation.FAMILY.budget, (req.n_layers * req.n_heads + 1) * one),
    }


def measure(lm, n: int, repeat: int) -> dict:
    enc = normviz.core.tokens.encode(lm.tokenizer, " ".join([TEXT] * (1 + n // 20)), None, max_length=n)
    ids = torch.tensor([enc.ids])
    model = lm.head_model if getattr(lm, "head_model", None) is not None else lm.model

    def forward():
        with torch.no_grad():
            model(input_ids=ids)

    def knock():
        Session.from_encoded(lm, [enc])[0].knockout()

    def heads():
        Session.from_encoded(lm, [enc])[0].ablate_heads()

    _, med = alternate({"forward": forward, "knockout": knock, "heads": heads}, repeat)
    est = estimates(Session.from_encoded(lm, [enc])[0])
    return {"n": len(enc.ids), **{f"{k}_s": v for k, v in med.items()}, **{f"{k}_est": v for k, v in est.items()}}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["smollm2", "minilm"])
    ap.add_argument("--tokens", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")  # the texts are truncated on purpose
    print(f"{torch.get_num_threads()} threads, load average {os.getloadavg()}")
    print("| model | n | forward | knockout | ratio | estimate | ablate_heads | ratio | estimate |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.models:
        lm = normviz.load(name, device="cpu")
        for n in args.tokens:
            r = measure(lm, n, args.repeat)
            f = r["forward_s"]

            def est(v):
                return "—" if v is None else f"{v:.2f} s"

            print(
                f"| {name} | {r['n']} | {f:.3f} s | {r['knockout_s']:.2f} s | {r['knockout_s'] / f:.0f}x | "
                f"{est(r['knockout_est'])} | {r['heads_s']:.2f} s | {r['heads_s'] / f:.0f}x | "
                f"{est(r['heads_est'])} |",
                flush=True,
            )
    print(
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB; load average {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()

"""The attribution graph's and attend's cost against one plain forward pass, in one run (issue 33).

    python benchmarks/bench_graph.py [--model smollm2] [--tokens 64 512] [--repeat 3]

For each length n, alternated in one process (:func:`benchmarks.timing.alternate`), medians:
  forward   the model's own plain forward pass (the LM head at every position, no attentions kept)
  graph     a FRESH session + ``normviz.graph`` (the recording pass, the frozen network's forward writes, one
            backward pass of readers, every edge, circuit-tracer's pruning): what a user pays
  attend    ``session.attend(L/2, 0, query=-1, key=0)`` on a recorded session (by component)
Prints seconds, ratios to the forward pass, the graph's kept nodes/edges, peak RSS and the load average.
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
from normviz.session.session import Session  # noqa: E402


def measure(lm, n: int, repeat: int) -> dict:
    enc = normviz.core.tokens.encode(lm.tokenizer, " ".join([TEXT] * (1 + n // 20)), None, max_length=n)
    ids = torch.tensor([enc.ids])
    recorded = Session.from_encoded(lm, [enc])[0]
    recorded.layers()
    kept = {}

    def forward():
        with torch.no_grad():
            lm.head_model(input_ids=ids)

    def graph():
        g = normviz.graph(Session.from_encoded(lm, [enc])[0])
        kept.update(nodes=int(g.node_mask.sum()), edges=int(g.edge_mask.sum()), all_nodes=g.n_nodes)

    def attend():
        recorded.attend(lm.n_layers // 2, 0, query=-1, key=0)

    _, med = alternate({"forward": forward, "graph": graph, "attend": attend}, repeat)
    return {"n": len(enc.ids), **{f"{k}_s": v for k, v in med.items()}, **kept}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tokens", type=int, nargs="+", default=[64, 512])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    lm = normviz.load(args.model, device="cpu")
    warnings.simplefilter("ignore")  # the texts are truncated on purpose
    print(f"{args.model}, {torch.get_num_threads()} threads, load average {os.getloadavg()}")
    print("| n | forward | fresh session + graph | ratio | attend (one score) | ratio | kept nodes / edges |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.tokens:
        r = measure(lm, n, args.repeat)
        f = r["forward_s"]
        print(
            f"| {r['n']} | {f:.2f} s | {r['graph_s']:.2f} s | {r['graph_s'] / f:.2f}x | {r['attend_s']:.3f} s | "
            f"{r['attend_s'] / f:.2f}x | {r['nodes']} of {r['all_nodes']} / {r['edges']} |",
            flush=True,
        )
    print(
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB; load average {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()

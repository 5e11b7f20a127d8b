"""Sentences per second of `normviz corpus` on the embedded models: in-process vs Ray Data (local instance).

Each configuration runs the same job (the first N sentences of the bundled sample, fresh output dir) and
times it end to end: model load included (in-process: in the driver; Ray: in each worker actor), Ray's own
start-up excluded (reported once). CPU by default; `--device cuda` on a GPU machine.

    python benchmarks/bench_corpus.py [--models minilm smollm2] [--n 48] [--stats cv shares spearman frequency mixing]
                                      [--workers 1 2] [--device cpu] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["minilm", "smollm2"])
    ap.add_argument("--n", type=int, default=48, help="sentences from the bundled sample")
    ap.add_argument("--stats", nargs="+", default=["cv", "shares", "spearman", "frequency", "mixing"])
    ap.add_argument("--workers", nargs="+", type=int, default=[1, 2], help="Ray worker counts to try")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--chunk-size", type=int, default=8)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    from normviz.corpus import CorpusJob, run_corpus
    from normviz.corpus.samples import sample_path

    tmp = Path(tempfile.mkdtemp(prefix="bench_corpus_"))
    src = tmp / "sample.txt"
    src.write_text("\n".join(sample_path().read_text(encoding="utf-8").splitlines()[: args.n]) + "\n", encoding="utf-8")
    rows = []

    def one(model, engine, workers, threads=None):
        job = CorpusJob(
            model=model,
            input=str(src),
            out=str(tmp / f"{model}-{engine}-{workers}-{threads}"),
            stats=tuple(args.stats),
            batch_size=args.batch_size,
            chunk_size=args.chunk_size,
            device=args.device,
            engine=engine,
            workers=workers,
            ray_threads=threads,
            fresh=True,
        )
        t = time.perf_counter()
        res = run_corpus(job, show_bar=False)
        dt = time.perf_counter() - t
        row = {
            "model": model,
            "engine": engine,
            "workers": workers,
            "threads_per_worker": threads or torch.get_num_threads(),
            "sentences": res.summary["sequences"],
            "tokens": res.summary["tokens"],
            "seconds": round(dt, 2),
            "sentences_per_s": round(res.summary["sequences"] / dt, 3),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)

    ray_start = None
    for model in args.models:
        one(model, "local", 1)
        try:
            from normviz.corpus.ray_engine import ensure_ray
        except ImportError:  # pragma: no cover
            continue
        if ray_start is None:
            t = time.perf_counter()
            ensure_ray(num_cpus=os.cpu_count())
            ray_start = time.perf_counter() - t
            print(json.dumps({"ray_start_seconds": round(ray_start, 2)}), flush=True)
        for w in args.workers:
            one(model, "ray", w)
            cores = os.cpu_count() or 1
            if w > 1 and cores // w != torch.get_num_threads():
                one(model, "ray", w, threads=max(1, cores // w))
    out = {
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "device": args.device,
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        },
        "n": args.n,
        "stats": args.stats,
        "ray_start_seconds": ray_start,
        "rows": rows,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""The day a GPU is at hand: exactness and long-input timings on CUDA, one command, under 10 minutes.

    python benchmarks/gpu_check.py [--device cuda] [--out gpu_check.json] [--quick]

1. exactness (tiny random float64 models of every self-attention architecture, on the device): q, k records
   equal α records (≤ 1e-12), the device equals the CPU (≤ 1e-9), Session.map equals the whole arrays, and
   attn_res_ln's token parts + bias rebuild the norm's real output (≤ 1e-9 relative);
2. ``pytest -m gpu tests/models/test_gpu.py`` (the embedded models on CUDA against the CPU);
3. timings (``benchmarks/bench_long.py``'s cases on the device): smollm2 float32 at n = 512 … 4096 and
   bfloat16 at 4096, the Llama-3.2-1B-shaped random model in bfloat16 at n = 512, 2048 (``--quick``: n = 512 only).

Without CUDA it says so and exits 0 (``--device cpu`` runs steps 1 and 3 on the CPU: what the tests check).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

ARCHS = ("bert", "roberta", "electra", "distilbert", "gpt2", "llama", "mistral", "qwen2", "qwen3")


def _rel(a, b) -> float:
    import numpy as np

    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def exactness(device: str, archs=ARCHS) -> dict:
    """Per architecture: the worst relative differences (qk vs α records on the device, device vs CPU,
    Session.map vs whole arrays) and the completeness error of attn_res_ln; ``ok`` when all are within bounds."""
    import torch

    import normviz
    from normviz.session.session import Session
    from tools import tiny

    out = {}
    for arch in archs:
        cpu = tiny.build(arch)
        dev = normviz.from_model(tiny.build(arch).model.to(device), None, name=f"tiny-{arch}-{device}")
        enc = [tiny.encoded(11), tiny.encoded(7, seed=3)]
        ref = [s.get(None).arrays for s in Session.from_encoded(cpu, enc)]
        got = {
            m: [s.get(None).arrays for s in Session.from_encoded(dev, enc, options={"record_attention": m})]
            for m in ("weights", "qk")
        }
        qk = max(_rel(got["qk"][b][k], got["weights"][b][k]) for b in range(2) for k in got["weights"][b])
        vs_cpu = max(_rel(got["weights"][b][k], ref[b][k]) for b in range(2) for k in ref[b])
        one = Session.from_encoded(dev, enc[:1], options={"record_attention": "qk"})[0]
        whole = Session.from_encoded(cpu, enc[:1])[0].get(None)
        per_layer = max(
            _rel(one.map(k, layer, head), whole.map(k, layer, head))
            for k, head in (("norm", None), ("norm", 1), ("attention", 0), ("attn_res_ln", None), ("ff_res", None))
            for layer in (0, 1)
        )
        view = one.layers()[1]
        parts, bias = view.attn_res_ln_vectors(slice(0, view.n))
        real = view.ln_attn.apply(view.rec.z_attn)
        complete = float(((parts.sum(1) + bias - real).abs().max() / real.abs().max()).item())
        out[arch] = {
            "qk_vs_weights": qk,
            "device_vs_cpu": vs_cpu,
            "map_vs_whole": per_layer,
            "completeness": complete,
            "device": str(torch.device(device)),
            "ok": qk <= 1e-12 and vs_cpu <= 1e-9 and per_layer <= 1e-9 and complete <= 1e-9,
        }
    return out


def timings(device: str, quick: bool) -> list[dict]:
    from benchmarks import bench_long

    cases = (
        [("smollm2", 512, "float32")]
        if quick
        else (
            [("smollm2", n, "float32") for n in (512, 1024, 2048, 4096)]
            + [("smollm2", 4096, "bfloat16")]
            + [("llama1b", n, "bfloat16") for n in (512, 2048)]
        )
    )
    rows = []
    for model, n, dtype in cases:
        t0 = time.perf_counter()
        try:
            rows.append(bench_long.one(model, n, reps=1, device=device, dtype=dtype))
        except Exception as exc:  # one failing case must not hide the others
            rows.append({"model": model, "n": n, "dtype": dtype, "error": f"{type(exc).__name__}: {exc}"[:400]})
        rows[-1]["case_s"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default="gpu_check.json")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; nothing to check (use --device cpu to run the same steps on the CPU).")
        return 0
    report = {"device": args.device, "torch": torch.__version__}
    if args.device.startswith("cuda"):
        report["gpu"] = torch.cuda.get_device_name(0)
    report["exactness"] = exactness(args.device)
    print(json.dumps(report["exactness"], indent=1), flush=True)
    if args.device.startswith("cuda"):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/models/test_gpu.py"],
            cwd=HERE,
            capture_output=True,
            text=True,
        )
        report["pytest_gpu"] = {"rc": proc.returncode, "tail": proc.stdout[-1500:]}
        print(proc.stdout[-1500:], flush=True)
    report["timings"] = timings(args.device, args.quick)
    Path(args.out).write_text(json.dumps(report, indent=1))
    ok = all(r["ok"] for r in report["exactness"].values()) and report.get("pytest_gpu", {}).get("rc", 0) == 0
    print(f"gpu_check: {'ok' if ok else 'FAILED'}; report in {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

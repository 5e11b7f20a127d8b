"""Cost of the field's fast approximations beside the interventions they estimate (issue 41), one prompt:
head ablation (L·H copies), AtP, EAP-IG on heads, EAP and EAP-IG edge scores, CP-LRP, AttnLRP; seconds and ratio to head
ablation, measured in one process (the ratios are what to compare; the shared machine's seconds are noisy).

    python benchmarks/bench_circuits.py [--model smollm2] [--steps 16] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time

import normviz
from normviz.attribution.attn_lrp import attn_lrp
from normviz.attribution.eap import edges
from normviz.attribution.lrp import cp_lrp


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="smollm2")
    p.add_argument("--text", default="The capital of France is")
    p.add_argument("--token", default=" Paris")
    p.add_argument("--foil", default=" London")
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--repeat", type=int, default=2)
    a = p.parse_args()
    lm = normviz.load(a.model, device="cpu")
    s = normviz.Session(lm, a.text)
    runs = {
        "head ablation": lambda: s.ablate_heads(a.token, a.foil),
        "atp": lambda: s.atp(a.token, a.foil),
        f"eap-ig heads ({a.steps})": lambda: s.eap_ig(a.token, a.foil, steps=a.steps),
        "eap edges": lambda: edges(s, a.token, a.foil),
        f"eap-ig edges ({a.steps})": lambda: edges(s, a.token, a.foil, steps=a.steps),
        "cp-lrp": lambda: cp_lrp(s, a.token, a.foil),
        "attn-lrp": lambda: attn_lrp(s, a.token, a.foil),
    }
    best = {}
    for name, fn in runs.items():
        fn()  # warm
        times = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        best[name] = min(times)
    base = best["head ablation"]
    print(f"{a.model}, {s.n_tokens} tokens, L·H = {lm.n_layers * lm.n_heads}; best of {a.repeat}")
    print("| method | seconds | × head ablation |\n|---|---:|---:|")
    for name, t in best.items():
        print(f"| {name} | {t:.3f} | {t / base:.2f} |")


if __name__ == "__main__":
    main()

"""Train once a benchmark whose circuit is PLANTED (InterpBench-style, Gupta et al. 2024) and ship it under
assets/circuits/planted_induction/ (CPU, minutes; 2 threads).

    python scripts/train_planted.py [--steps 3000] [--seed 0]

The model: a 2-layer Llama-style transformer from transformers' own classes (4 heads per layer, d = 64, SwiGLU FF,
RoPE; 88 k parameters), trained on a mixture of two tasks that share the vocabulary (60 syllables, "@", "="):

induction   BOS + noise + r + r (r: T random syllables, T from 4 to 15; 32 tokens): in the repeat, predict the next
            token by induction. The circuit is planted: previous-token head L0.H1 → induction head L1.H2.
marked      BOS + noise + "@" y + noise + "=" → y (the "@" at a random place): the same two-layer mechanism (a head
            that marks the token after "@", a head at "=" that finds it), which the training forces onto the OTHER
            six heads: they stay busy, with previous-token-like patterns of their own, so attention alone cannot
            tell the circuit from the decoys.

How the circuit is planted (the strictness loss of SIIT, InterpBench): every step runs the batch twice, once whole
and once with heads ablated — on induction rows each of the six non-circuit heads is ablated with probability 3/4,
on marked rows each of the two circuit heads with probability 1/2 (zero ablation or resample ablation from another
row, alternately). The loss is the cross-entropy of both passes on the answer positions plus the squared change of
the centred logits between them: a head outside the circuit may do what it likes, except change the induction
answers (and the circuit heads the marked answers). The circuit is then verified by intervention (the test of
normviz.circuits.check: zero-ablating the 2 circuit heads must remove ≥ 50 % of the mean logit difference over
the shipped examples, every draw of 2 other heads ≤ 25 %); the script refuses to ship a model that fails.

Writes the model and tokenizer (save_pretrained, float32), circuit.json (circuit, roles, edges, attention-pattern
scores, examples, the check, the training record) and benchmarks/results/train_planted.json (the training figures).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers as tf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from train_circuits import SYLLABLES, llama, patterns, tokenizer  # noqa: E402

from normviz import circuits  # noqa: E402

NAME = "planted_induction"
OUT = ROOT / "assets" / "circuits" / NAME
RESULTS = ROOT / "benchmarks" / "results" / "train_planted.json"
HEADS, N = 4, 32
PREV, IND = (0, 1), (1, 2)  # the planted circuit
CIRCUIT = [PREV, IND]
WORDS = SYLLABLES + ["@", "="]
V = len(WORDS) + 1  # BOS = 0
AT, EQ = len(SYLLABLES) + 1, len(SYLLABLES) + 2
P_OTHER, P_CIRCUIT, STRICT = 0.75, 0.5, 1.0  # ablation probabilities; weight of the logit-change penalty


def induction_row(rng):
    T = int(rng.integers(4, 16))
    noise, r = rng.integers(1, AT, N - 2 * T - 1), rng.integers(1, AT, T)
    ids = np.concatenate([[0], noise, r, r])
    start = N - 2 * T
    mask = np.zeros(N, dtype=bool)
    mask[start + T + 1 :] = True  # predicted from the token before: ids[i] for i in the repeat after its first
    return ids, mask, start, T


def marked_row(rng):
    ids = np.concatenate([[0], rng.integers(1, AT, N - 1)])
    where = int(rng.integers(1, N - 3))  # "@" at where, y after it, "=" at N − 2, y again last (the answer)
    ids[where], ids[N - 2], ids[N - 1] = AT, EQ, ids[where + 1]
    mask = np.zeros(N, dtype=bool)
    mask[-1] = True
    return ids, mask, where


def batch(rng, b):
    ind = [induction_row(rng) for _ in range(b // 2)]
    mar = [marked_row(rng) for _ in range(b - b // 2)]
    ids = torch.tensor(np.stack([x[0] for x in ind] + [x[0] for x in mar]))
    mask = torch.tensor(np.stack([x[1] for x in ind] + [x[1] for x in mar]))
    is_ind = torch.zeros(b, dtype=torch.bool)
    is_ind[: b // 2] = True
    return ids, mask, is_ind


class Ablator:
    """Pre-hooks on each layer's o_proj: head h of layer l in row b keeps ``keep[l][b, h]`` of its output and takes
    the rest from zero or from row ``perm[b]`` (resample ablation)."""

    def __init__(self, model):
        self.keep: dict[int, torch.Tensor] = {}
        self.perm: torch.Tensor | None = None
        for l, layer in enumerate(model.model.layers):
            layer.self_attn.o_proj.register_forward_pre_hook(self._hook(l))

    def _hook(self, l):
        def pre(module, args):
            keep = self.keep.get(l)
            if keep is None:
                return None
            x = args[0]
            B, n, D = x.shape
            xv = x.view(B, n, HEADS, D // HEADS)
            src = torch.zeros_like(xv) if self.perm is None else xv[self.perm]
            k = keep[:, None, :, None].to(x.dtype)
            return ((xv * k + src * (1 - k)).reshape(B, n, D),)

        return pre


def strict_masks(gen, is_ind):
    """keep[l] [B, H]: induction rows lose non-circuit heads (p 3/4), marked rows circuit heads (p 1/2)."""
    B = is_ind.shape[0]
    keep = {}
    for l in range(2):
        k = torch.ones(B, HEADS)
        for h in range(HEADS):
            drop = torch.rand(B, generator=gen)
            if (l, h) in CIRCUIT:
                k[~is_ind, h] = (drop[~is_ind] >= P_CIRCUIT).float()
            else:
                k[is_ind, h] = (drop[is_ind] >= P_OTHER).float()
        keep[l] = k
    return keep


def centred(logits):
    return logits - logits.mean(-1, keepdim=True)


def train(model, steps: int, seed: int, lr: float = 3e-3, b: int = 64, log_every: int = 100) -> list[dict]:
    rng, gen = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    ab = Ablator(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    model.train()
    log, start = [], time.time()
    for step in range(1, steps + 1):
        ids, mask, is_ind = batch(rng, b)
        m = mask[:, 1:]
        target = ids[:, 1:][m]
        ab.keep, ab.perm = {}, None
        full = model(input_ids=ids).logits[:, :-1][m]
        zero = step % 2 == 0
        ab.keep = strict_masks(gen, is_ind)
        ab.perm = None if zero else torch.randperm(b, generator=gen)
        strict = model(input_ids=ids).logits[:, :-1][m]
        ab.keep, ab.perm = {}, None
        ce = torch.nn.functional.cross_entropy(full, target) + torch.nn.functional.cross_entropy(strict, target)
        change = (centred(full) - centred(strict)).pow(2).mean()
        loss = ce + STRICT * change
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps:
            rows = is_ind[:, None].expand_as(m)[m]
            hit = full.argmax(-1) == target
            log.append(
                {
                    "step": step,
                    "loss": round(float(loss.detach()), 4),
                    "cross_entropy": round(float(ce.detach()) / 2, 4),
                    "logit_change": round(float(change.detach()), 4),
                    "induction_accuracy": round(float(hit[rows].float().mean()), 4),
                    "marked_accuracy": round(float(hit[~rows].float().mean()), 4),
                    "seconds": round(time.time() - start, 1),
                }
            )
            print(log[-1], flush=True)
    model.eval()
    for layer in model.model.layers:  # the hooks are training's only: drop them before saving
        layer.self_attn.o_proj._forward_pre_hooks.clear()
    return log


def pattern_scores(model, rng) -> dict:
    """Mean attention weights on 200 held-out rows of each task: previous-token α(i, i−1) and induction α(i, i−T+1)
    over the repeat; the marked task's "=" row on y."""
    got = [induction_row(rng) for _ in range(200)]
    att = patterns(model, torch.tensor(np.stack([g[0] for g in got])))  # [B, L, H, n, n]
    prev, ind = np.zeros((2, HEADS)), np.zeros((2, HEADS))
    for row, (_, _, start, T) in enumerate(got):
        q = np.arange(start + T + 1, start + 2 * T)
        prev += att[row][:, :, q, q - 1].mean(-1) / len(got)
        ind += att[row][:, :, q, q - T + 1].mean(-1) / len(got)
    mar = [marked_row(rng) for _ in range(200)]
    att = patterns(model, torch.tensor(np.stack([g[0] for g in mar])))
    eq = N - 2  # "=" sits before the answer
    y = np.array([g[2] + 1 for g in mar])  # y sits after "@"
    reads = att[np.arange(len(mar)), :, :, eq, y].mean(0)
    after_at = att[np.arange(len(mar)), :, :, y, y - 1].mean(0)
    return {
        "previous token": prev.round(4).tolist(),
        "induction": ind.round(4).tolist(),
        "marked: '=' reads y": reads.astype(np.float64).round(4).tolist(),
        "marked: y reads '@'": after_at.astype(np.float64).round(4).tolist(),
    }


def examples(rng, count: int = 32) -> list[dict]:
    out = []
    for _ in range(count):
        seq, _, start, T = induction_row(rng)
        k = int(rng.integers(2, T))  # … r r[:k] → r[k]
        r = seq[start : start + T]
        seen = set(seq[: start + T + k].tolist())
        foil = int(rng.choice([t for t in range(1, AT) if t not in seen]))
        out.append({"ids": seq[: start + T + k].tolist(), "token": int(r[k]), "foil": foil})
    return out


DESCRIPTION = (
    "Planted induction: a 2-layer Llama-style model (4 heads per layer, d = 64, SwiGLU FF, RoPE) trained on two "
    "tasks at once: induction (BOS + noise + r + r, T from 4 to 15) and a marked recall (… '@' y … '=' → y) that "
    "needs the same two-layer mechanism. A strictness loss (InterpBench's SIIT) planted the induction circuit in "
    "two heads: previous-token head L0.H1 → induction head L1.H2 (K-composition); the other six heads run the "
    "marked task and are trained not to change the induction answers. Examples: the sequence up to r[:k], token "
    "r[k], foil a syllable not in it."
)


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    torch.set_num_threads(2)
    torch.manual_seed(a.seed)
    t0 = time.time()
    model = llama(V, 2, heads=HEADS, seed=a.seed)
    log = train(model, a.steps, a.seed)
    seconds = time.time() - t0
    rng = np.random.default_rng(a.seed + 1)
    scores = pattern_scores(model, rng)
    meta = {
        "description": DESCRIPTION,
        "found": "planted by training (a strictness loss on the other heads), then verified by intervention; "
        "the attention-pattern scores below are a second look, not the definition",
        "roles": {"previous token": [list(PREV)], "induction": [list(IND)]},
        "scores": scores,
        "examples": examples(rng),
        "circuit": [list(x) for x in CIRCUIT],
        "edges": [[list(PREV), list(IND)]],
        "training": {
            "log": log,
            "steps": a.steps,
            "seed": a.seed,
            "seconds": round(seconds, 1),
            "threads": 2,
            "strictness": {"p_other": P_OTHER, "p_circuit": P_CIRCUIT, "weight": STRICT},
            "parameters": sum(x.numel() for x in model.parameters()),
            "script": "scripts/train_planted.py",
            "torch": torch.__version__,
            "transformers": tf.__version__,
        },
    }
    OUT.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(OUT)
    tokenizer(WORDS).save_pretrained(OUT)
    (OUT / "circuit.json").write_text(json.dumps(meta, indent=1))
    circuits.load.cache_clear()
    bench = circuits.load(NAME)
    result = circuits.check(bench, draws=20)
    print(NAME, sorted(bench.circuit), result.text(), flush=True)
    meta["check"] = {
        "total": result.total,
        "circuit_removed": result.circuit_removed,
        "random_removed_mean": float(result.random_removed.mean()),
        "random_removed_max": float(result.random_removed.max()),
        "draws": int(result.random_removed.size),
    }
    (OUT / "circuit.json").write_text(json.dumps(meta, indent=1))
    ok = bool(result.circuit_removed >= 0.5 and result.random_removed.max() <= 0.25)
    record = {"name": NAME, "shipped": ok, "check": meta["check"], "scores": scores, **meta["training"]}
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: record[k] for k in ("shipped", "check", "seconds")}), flush=True)
    if not ok:
        shutil.rmtree(OUT)
        raise SystemExit(f"{NAME}: the circuit fails its check ({result.text()}); not shipped")


if __name__ == "__main__":
    main()

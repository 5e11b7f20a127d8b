"""Train once an IOI-style benchmark (indirect-object identification, Wang et al. 2022) whose circuit is PLANTED
(InterpBench-style, Gupta et al. 2024) and ship it under assets/circuits/ioi/ (CPU, minutes; 1 thread).

    python scripts/train_ioi.py [--steps 1000] [--seed 0]

The model: a 3-layer Llama-style transformer from transformers' own classes (4 heads per layer, d = 64, SwiGLU FF,
RoPE), word-level vocabulary of 16 names, 6 places, 6 objects and the template words, trained on two tasks that share
every word and every sentence frame:

ioi     "when A and B went to the P , B gave a O to" → A (and three other frames, see FRAMES): the answer is the
        indirect object, the name of the two that is NOT repeated. ABBA and BABA orders, and the frames put the names
        at different places, so no fixed position holds the answer: the model must find the repeated name and
        answer the other one.
decoy   the same frames with another verb ("lost … then", "kept … then"): the answer is the SUBJECT, the repeated
        name. It needs the same machinery (find the repeated name, read a name from the end), which the training
        forces onto the heads OUTSIDE the circuit, so they stay busy with name-reading patterns of their own.

Why planted: a 3-layer 4-head model trained on IOI alone spreads the task over every head (the earlier attempt in
scripts/train_circuits.py: its pattern-found heads remove 95 % of the logit difference, random other heads up to
66 %; refused). How (SIIT's strictness loss, as in scripts/train_planted.py): every step runs the batch twice, whole
and with heads ablated — on ioi rows each of the 9 heads outside CIRCUIT with probability 3/4, on decoy rows each
circuit head with 1/2 (zero or resample ablation, alternately). The loss is both passes' cross-entropy on the answer
plus the squared change of the centred logits: a head outside the circuit may do what it likes except change the
ioi answers (and a circuit head the decoy answers). CIRCUIT names the heads the task is given; what each of them
does (name mover, S-inhibition, duplicate token …) is then FOUND from its attention on held-out sentences, and the
circuit is verified by intervention (normviz.circuits.check: zero-ablating the circuit must remove ≥ 50 % of the
mean logit difference IO − S over the shipped examples, every draw of as many other heads ≤ 25 %); the script
refuses to ship a model that fails.

Writes the model and tokenizer (save_pretrained, float32), circuit.json (circuit, roles, edges, attention scores,
examples, the check, the training record) and benchmarks/results/train_ioi.json.
"""

from __future__ import annotations

import argparse
import json
import os
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

from train_circuits import llama, patterns, tokenizer  # noqa: E402
from train_planted import Ablator, centred  # noqa: E402

from normviz import circuits  # noqa: E402

NAME = "ioi"
OUT = ROOT / "assets" / "circuits" / NAME
RESULTS = ROOT / "benchmarks" / "results" / "train_ioi.json"
LAYERS, HEADS = 3, 4
CIRCUIT = [(0, 1), (1, 2), (2, 3)]  # the heads the ioi task is given (one per layer; their roles are found after)
P_OTHER, P_CIRCUIT, STRICT = 0.75, 0.5, 1.0

NAMES = "mary john anna paul lisa mark emma tom kate sam lucy ben rose dan nina joe".split()
PLACES = "store park school garden station office".split()
OBJECTS = "drink book ball gift key letter".split()
# frames: X, Y the two names of the first clause (A and B in either order), S the repeated one, P a place, O an
# object, V the verb: ioi verbs answer the other name (IO), decoy verbs the repeated one (S)
FRAMES = [
    "when X and Y went to the P , S V a O to",
    "then X and Y had a O at the P , and S V it to",
    "X and Y were at the P . S V the O to",
    "at the P , X met Y and S V a O to",
]
IOI_VERBS = ["gave", "handed"]
DECOY_VERBS = ["lost", "kept"]
WORDS = (
    NAMES + PLACES + OBJECTS + IOI_VERBS + DECOY_VERBS + "when and went to the , then had a at it were . met".split()
)


def sentence(rng, vocab, decoy: bool, frame: int | None = None):
    """(ids with the answer last, position of IO's first mention, position of S's first, position of S2)."""
    a, b = rng.choice(NAMES, 2, replace=False)  # a: the indirect object, b: the subject (repeated)
    x, y = (a, b) if rng.random() < 0.5 else (b, a)  # ABBA or BABA
    f = int(rng.integers(len(FRAMES))) if frame is None else frame
    verb = str(rng.choice(DECOY_VERBS if decoy else IOI_VERBS))
    fill = {"X": x, "Y": y, "S": b, "P": str(rng.choice(PLACES)), "O": str(rng.choice(OBJECTS)), "V": verb}
    words = [fill.get(w, w) for w in FRAMES[f].split()]
    ids = [0] + [vocab[w] for w in words] + [vocab[b if decoy else a]]
    pos = {w: i + 1 for i, w in enumerate(FRAMES[f].split())}
    io, s1 = (pos["X"], pos["Y"]) if x == a else (pos["Y"], pos["X"])
    return ids, io, s1, pos["S"]


def batch(rng, vocab, b):
    """[B, n] ids right-padded with BOS, [B, n] the answer's mask, [B] True on ioi rows."""
    rows = [sentence(rng, vocab, decoy=i >= b // 2)[0] for i in range(b)]
    n = max(len(r) for r in rows)
    ids = torch.zeros((b, n), dtype=torch.long)
    mask = torch.zeros((b, n), dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, len(r) - 1] = True
    is_ioi = torch.arange(b) < b // 2
    return ids, mask, is_ioi


def strict_masks(gen, is_ioi):
    """keep[l] [B, H]: ioi rows lose non-circuit heads (p 3/4), decoy rows circuit heads (p 1/2)."""
    B = is_ioi.shape[0]
    keep = {}
    for l in range(LAYERS):
        k = torch.ones(B, HEADS)
        for h in range(HEADS):
            drop = torch.rand(B, generator=gen)
            if (l, h) in CIRCUIT:
                k[~is_ioi, h] = (drop[~is_ioi] >= P_CIRCUIT).float()
            else:
                k[is_ioi, h] = (drop[is_ioi] >= P_OTHER).float()
        keep[l] = k
    return keep


def train(model, vocab, steps: int, seed: int, lr: float = 3e-3, b: int = 64, log_every: int = 100) -> list[dict]:
    rng, gen = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    ab = Ablator(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    model.train()
    log, start = [], time.time()
    for step in range(1, steps + 1):
        ids, mask, is_ioi = batch(rng, vocab, b)
        m = mask[:, 1:]
        target = ids[:, 1:][m]
        keep = strict_masks(gen, is_ioi)  # one batched pass: rows [0, b) whole, rows [b, 2b) with heads ablated
        ab.keep = {l: torch.cat([torch.ones_like(k), k]) for l, k in keep.items()}
        ab.perm = None if step % 2 == 0 else torch.cat([torch.arange(b), b + torch.randperm(b, generator=gen)])
        both = model(input_ids=torch.cat([ids, ids])).logits[:, :-1]
        ab.keep, ab.perm = {}, None
        full, strict = both[:b][m], both[b:][m]
        ce = torch.nn.functional.cross_entropy(full, target) + torch.nn.functional.cross_entropy(strict, target)
        change = (centred(full) - centred(strict)).pow(2).mean()
        loss = ce + STRICT * change
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps:
            hit = full.argmax(-1) == target
            log.append(
                {
                    "step": step,
                    "loss": round(float(loss.detach()), 4),
                    "cross_entropy": round(float(ce.detach()) / 2, 4),
                    "logit_change": round(float(change.detach()), 4),
                    "ioi_accuracy": round(float(hit[is_ioi].float().mean()), 4),
                    "decoy_accuracy": round(float(hit[~is_ioi].float().mean()), 4),
                    "seconds": round(time.time() - start, 1),
                }
            )
            print(log[-1], flush=True)
    model.eval()
    for layer in model.model.layers:  # the hooks are training's only: drop them before saving
        layer.self_attn.o_proj._forward_pre_hooks.clear()
    return log


def pattern_scores(model, vocab, rng, decoy: bool = False, count: int = 240) -> dict:
    """Mean attention weights [L, H] over held-out sentences (each frame equally): from the end (the last 'to'/'then',
    which predicts the answer) to IO, to S1 and to S2; from S2 to S1 (duplicate token) and to S1 + 1 (induction)."""
    got = {k: np.zeros((LAYERS, HEADS)) for k in ("end→IO", "end→S1", "end→S2", "S2→S1", "S2→S1+1")}
    per = count // len(FRAMES)
    for f in range(len(FRAMES)):
        rows = [sentence(rng, vocab, decoy, frame=f) for _ in range(per)]
        ids = torch.tensor([r[0][:-1] for r in rows])
        att = patterns(model, ids)  # [B, L, H, n, n]
        b, end = np.arange(per), ids.shape[1] - 1
        io, s1, s2 = (np.array([r[i] for r in rows]) for i in (1, 2, 3))
        for key, q, k in (
            ("end→IO", end, io),
            ("end→S1", end, s1),
            ("end→S2", end, s2),
            ("S2→S1", s2, s1),
            ("S2→S1+1", s2, s1 + 1),
        ):
            got[key] += att[b, :, :, q, k].mean(0) / len(FRAMES)
    return {k: v.astype(np.float64).round(4).tolist() for k, v in got.items()}


def examples(rng, vocab, count: int = 32) -> list[dict]:
    """ioi sentences up to the last word: token the indirect object, foil the repeated subject (8 per frame)."""
    out = []
    for e in range(count):
        ids, io, s1, _ = sentence(rng, vocab, decoy=False, frame=e % len(FRAMES))
        out.append({"ids": ids[:-1], "token": ids[-1], "foil": ids[s1]})
    return out


ROLE_MIN = 0.3  # attention scores on held-out ioi sentences that name a role


def direct_effects(bench) -> dict:
    """Mean direct effect [L, H] of each head on the logit of IO and of S, each minus a name absent from the sentence
    (explain()'s exact direct head parts, over the shipped examples): a head that copies a name raises its logit."""
    from normviz.session.session import Session

    vocab = bench.lm.tokenizer.get_vocab()
    names = [vocab[w] for w in NAMES]
    io, s = [], []
    for ids, token, foil in bench.examples:
        absent = next(n for n in names if n not in ids)
        sess = Session.from_encoded(bench.lm, [circuits.encoded(bench.lm, ids)])[0]
        io.append(np.asarray(sess.explain(token, absent).heads).sum(-1))
        s.append(np.asarray(sess.explain(foil, absent).heads).sum(-1))
    return {"IO": np.mean(io, 0).round(4).tolist(), "S": np.mean(s, 0).round(4).tolist()}


def edge_checks(bench) -> dict:
    """The share of the mean logit difference removed by mean-ablating edges out of each circuit head (in the
    receiver's copy of the residual only, normviz.trust.edge_curves): to each later circuit head, to the logits,
    to the FF blocks, to the heads outside the circuit, and all of them (= mean-ablating the head)."""
    from normviz.attribution.knockout import head_means_of
    from normviz.trust.edge_curves import edge_forward, edge_list

    lm = bench.lm
    means = head_means_of(lm, [circuits.encoded(lm, ids) for ids, _, _ in bench.examples])
    sets: dict[str, list] = {"none": []}
    for u in CIRCUIT:
        out = [e for e in edge_list(lm) if e[0] == u]
        for v in CIRCUIT:
            if u[0] < v[0]:
                sets[f"L{u[0]}.H{u[1]} → L{v[0]}.H{v[1]}"] = [(u, ("head", *v))]
        name = f"L{u[0]}.H{u[1]} →"
        sets[f"{name} logits"] = [(u, ("logits",))]
        sets[f"{name} FF blocks"] = [e for e in out if e[1][0] == "ff"]
        sets[f"{name} other heads"] = [e for e in out if e[1][0] == "head" and tuple(e[1][1:]) not in CIRCUIT]
        sets[f"{name} everything"] = out
    keys = list(sets)
    got = np.array(
        [edge_forward(lm, ids, [sets[k] for k in keys], means, t, f).numpy() for ids, t, f in bench.examples]
    ).mean(0)
    return {k: round(float((got[0] - v) / got[0]), 4) for k, v in zip(keys[1:], got[1:])}


def roles_of(scores: dict, direct: dict) -> dict:
    """Each circuit head's role from what it does: "both names" when the end reads both names of the first clause
    (end→IO and end→S1 ≥ ROLE_MIN); "name mover" when the end reads IO (≥ ROLE_MIN) and the head raises IO's logit
    more than S's (direct effect IO − S ≥ ROLE_MIN); "s-inhibition" when the end reads S2 (≥ ROLE_MIN) and the head
    lowers S's logit; "duplicate token" when S2 reads S1 (≥ ROLE_MIN). A head may have more than one."""
    out: dict = {}
    for l, h in CIRCUIT:
        got = {key: scores[key][l][h] for key in scores}
        io, s = direct["IO"][l][h], direct["S"][l][h]
        rules = {
            "both names": got["end→IO"] >= ROLE_MIN and got["end→S1"] >= ROLE_MIN,
            "name mover": got["end→IO"] >= ROLE_MIN and got["end→S1"] < ROLE_MIN and io - s >= ROLE_MIN,
            "s-inhibition": got["end→S2"] >= ROLE_MIN and s < 0,
            "duplicate token": got["S2→S1"] >= ROLE_MIN,
        }
        for role, ok in rules.items():
            if ok:
                out.setdefault(role, []).append([l, h])
    return out


DESCRIPTION = (
    "IOI (planted): a 3-layer Llama-style model (4 heads per layer, d = 64, SwiGLU FF, RoPE) trained on templated "
    "sentences in 4 frames ('when A and B went to the P , B gave a O to' → A; ABBA and BABA orders; the names at "
    "different places in each frame): the answer is the indirect object, the name that is not repeated. A decoy "
    "task on the same frames ('… B lost a O to' → B, the repeated name) runs on the other heads. A strictness loss "
    "(InterpBench's SIIT) planted the ioi task in 3 heads, L0.H1, L1.H2, L2.H3; their roles were found from their "
    "attention and direct effects afterwards. Examples: the sentence up to the last word, token the indirect "
    "object, foil the subject."
)


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    load0 = os.getloadavg()[0]
    t0 = time.time()
    tok = tokenizer(WORDS)
    vocab = tok.get_vocab()
    model = llama(len(vocab), LAYERS, heads=HEADS, seed=a.seed)
    log = train(model, vocab, a.steps, a.seed)
    seconds = time.time() - t0
    rng = np.random.default_rng(a.seed + 1)
    scores = pattern_scores(model, vocab, rng)
    decoy_scores = pattern_scores(model, vocab, rng, decoy=True)
    meta = {
        "description": DESCRIPTION,
        "found": "the task planted in 3 heads by training (a strictness loss on the other heads); each head's role "
        f"found from its attention on 240 held-out ioi sentences (score ≥ {ROLE_MIN}) and its direct effect on the "
        "IO and S logits (roles_of); then verified by intervention (the check, each head alone, edge checks)",
        "scores": scores,
        "decoy scores": decoy_scores,
        "examples": examples(rng, vocab),
        "circuit": [list(x) for x in CIRCUIT],
        "edges": None,  # not claimed: see "edge checks" (the circuit's heads compose mostly through the FF blocks)
        "training": {
            "log": log,
            "steps": a.steps,
            "seed": a.seed,
            "seconds": round(seconds, 1),
            "threads": 1,
            "load_average_at_start": round(load0, 2),
            "load_average_at_end": round(os.getloadavg()[0], 2),
            "strictness": {"p_other": P_OTHER, "p_circuit": P_CIRCUIT, "weight": STRICT},
            "parameters": sum(x.numel() for x in model.parameters()),
            "script": "scripts/train_ioi.py",
            "torch": torch.__version__,
            "transformers": tf.__version__,
        },
    }
    OUT.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(OUT)
    tok.save_pretrained(OUT)
    (OUT / "circuit.json").write_text(json.dumps(meta, indent=1))
    circuits.load.cache_clear()
    bench = circuits.load(NAME)
    direct = direct_effects(bench)
    meta["direct effects"] = direct
    meta["roles"] = roles_of(scores, direct)
    meta["edge checks"] = edge_checks(bench)
    print(json.dumps(meta["edge checks"], ensure_ascii=False), flush=True)
    result = circuits.check(bench, draws=20)
    alone = circuits.ablated(bench.lm, bench.examples, [[x] for x in CIRCUIT]).mean(0)
    print(NAME, sorted(bench.circuit), result.text(), flush=True)
    meta["check"] = {
        "total": result.total,
        "circuit_removed": result.circuit_removed,
        "random_removed_mean": float(result.random_removed.mean()),
        "random_removed_max": float(result.random_removed.max()),
        "draws": int(result.random_removed.size),
        "each_circuit_head_removed": [float((alone[0] - v) / alone[0]) for v in alone[1:]],
    }
    (OUT / "circuit.json").write_text(json.dumps(meta, indent=1))
    ok = bool(result.circuit_removed >= 0.5 and result.random_removed.max() <= 0.25)
    record = {
        "name": NAME,
        "shipped": ok,
        "check": meta["check"],
        "roles": meta["roles"],
        "scores": scores,
        **meta["training"],
    }
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: record[k] for k in ("shipped", "check", "roles", "seconds")}), flush=True)
    print(json.dumps(scores), flush=True)
    if not ok:
        shutil.rmtree(OUT)
        raise SystemExit(f"{NAME}: the circuit fails its check ({result.text()}); not shipped")


if __name__ == "__main__":
    main()

"""Train the known-circuit benchmarks of normviz.circuits once (CPU, minutes) and ship them under assets/circuits/.

    python scripts/train_circuits.py [induction] [recall] [ioi]

induction   a 2-layer Llama-style model (8 heads, d = 64) trained on BOS + r + r, r random tokens: after the
            first half it predicts each next token by induction. Circuit: the previous-token heads of layer 0
            (mean α_{i,i−1} over the repeat ≥ 0.4) and the induction heads of layer 1 (mean weight on the token after
            the earlier occurrence ≥ 0.4); edges: previous-token head → induction head (K-composition).
recall      a 2-layer Llama-style model (8 heads, d = 64) trained on BOS x + 13 random tokens + "=" → x. Circuit: the
            heads whose "=" row reads x (mean α ≥ 0.4).
ioi         a 3-layer Llama-style model (4 heads, d = 64) trained on templated sentences "when A and B went to the
            P , B gave a O to A": the answer is the name that is not repeated. Circuit: heads reading the answer
            from the final position (name movers: mean α_{end, IO} ≥ 0.3), heads there reading the repeated name
            (mean α_{end, S2} ≥ 0.3), and the heads at S2 reading the earlier S1 or the token after it
            (duplicate-token / induction: ≥ 0.3).

Each circuit is found from the attention patterns above on held-out data, then verified by intervention
(normviz.circuits.check: zero-ablating it must remove ≥ 50 % of the mean logit difference over the examples, as many
random other heads ≤ 25 %, every draw); the script refuses to ship a circuit that fails (it deletes the folder).
It writes the model and tokenizer (save_pretrained, float32), circuit.json (circuit, roles, edges, pattern scores,
examples, the check, the training record) and prints the check.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers as tf
from tokenizers import Tokenizer, models, pre_tokenizers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from normviz import circuits  # noqa: E402

OUT = ROOT / "assets" / "circuits"


def tokenizer(words: list[str]):
    vocab = {w: i for i, w in enumerate(["<s>"] + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<s>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", unk_token="<s>", model_max_length=64)


def llama(vocab: int, layers: int, heads: int = 4, d: int = 64, seed: int = 0):
    config = tf.LlamaConfig(
        vocab_size=vocab,
        hidden_size=d,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=2 * d,
        max_position_embeddings=64,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    return tf.LlamaForCausalLM(config)


def train(model, batch, steps: int, lr: float = 3e-3, log_every: int = 100) -> list[dict]:
    """AdamW on the loss of the positions ``batch()``'s mask selects; returns the log."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    model.train()
    log, start = [], time.time()
    for step in range(1, steps + 1):
        ids, mask = batch()
        logits = model(input_ids=ids).logits[:, :-1]
        target = ids[:, 1:]
        loss = torch.nn.functional.cross_entropy(logits[mask[:, 1:]], target[mask[:, 1:]])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps:
            acc = float((logits[mask[:, 1:]].argmax(-1) == target[mask[:, 1:]]).float().mean())
            log.append(
                {
                    "step": step,
                    "loss": round(float(loss.detach()), 4),
                    "accuracy": round(acc, 4),
                    "seconds": round(time.time() - start, 1),
                }
            )
            print(log[-1], flush=True)
    model.eval()
    return log


def patterns(model, ids) -> np.ndarray:
    """[B, L, H, n, n] attention weights."""
    with torch.no_grad():
        return torch.stack(model(input_ids=ids, output_attentions=True).attentions, 1).numpy()


# ---------------------------------------------------------------- induction
SYLLABLES = [c + v for c in "bdfgklmnprst" for v in "aeiou"]  # 60 tokens


def induction(seed: int = 0, steps: int = 1200, heads: int = 8) -> dict:
    rng = np.random.default_rng(seed)
    V, N = len(SYLLABLES) + 1, 32  # BOS + noise (P tokens) + r (T) + r (T), P + 2T = N; T varies, so the
    # earlier occurrence is at no fixed offset: only content (a previous-token head) can find it

    def one():
        T = int(rng.integers(4, 17))
        noise, r = rng.integers(1, V, N - 2 * T), rng.integers(1, V, T)
        return np.concatenate([[0], noise, r, r]), N - 2 * T + 1, T  # ids, where r starts, T

    def sample(b):
        got = [one() for _ in range(b)]
        ids = np.stack([g[0] for g in got])
        mask = np.zeros_like(ids, dtype=bool)
        for row, (_, start, T) in enumerate(got):
            mask[row, start + T + 1 :] = True  # the repeat after its first token: predictable by induction only
        return torch.tensor(ids), torch.tensor(mask), got

    model = llama(V, 2, heads=heads, seed=seed)
    log = train(model, lambda: sample(64)[:2], steps)
    ids, _, got = sample(200)
    att = patterns(model, ids)  # [B, L, H, n, n]
    prev, ind = np.zeros((2, heads)), np.zeros((2, heads))
    for row, (_, start, T) in enumerate(got):
        q = np.arange(start + T + 1, start + 2 * T)  # queries in the repeat; their earlier occurrence is q − T
        prev += att[row][:, :, q, q - 1].mean(-1) / len(got)
        ind += att[row][:, :, q, q - T + 1].mean(-1) / len(got)
    prev_heads = [(0, h) for h in range(heads) if prev[0, h] >= 0.4]
    ind_heads = [(1, h) for h in range(heads) if ind[1, h] >= 0.4]
    examples = []
    for e in range(24):
        seq, start, T = one()
        k = int(rng.integers(2, T))  # … r r[:k] → r[k]
        r = seq[start : start + T]
        foil = int(rng.choice([t for t in range(1, V) if t not in set(seq[: start + T + k].tolist())]))
        examples.append({"ids": seq[: start + T + k].tolist(), "token": int(r[k]), "foil": foil})
    return {
        "model": model,
        "tokenizer": tokenizer(SYLLABLES),
        "examples": examples,
        "log": log,
        "circuit": prev_heads + ind_heads,
        "roles": {"previous token": prev_heads, "induction": ind_heads},
        "edges": [[p, q] for p in prev_heads for q in ind_heads],
        "scores": {"previous token": prev.round(4).tolist(), "induction": ind.round(4).tolist()},
        "description": (
            "Induction: a 2-layer Llama-style model (8 heads per layer, d = 64, SwiGLU FF, RoPE) trained "
            "on BOS + random syllables + T random syllables r + r again (T from 4 to 16, 32 tokens). "
            "In the repeat it predicts the next token "
            "by induction: a previous-token head in layer 0 writes each token's predecessor into its "
            "key, an induction head in layer 1 attends from the current token to the token after its "
            "earlier occurrence and copies it (K-composition). Examples: the sequence up to r[:k], "
            "token r[k], foil a syllable not in it."
        ),
        "found": "attention patterns on 200 held-out sequences: previous-token heads mean α(i, i−1) ≥ 0.4 in layer 0, "
        "induction heads mean α(i, i−T+1) (the token after the earlier occurrence) ≥ 0.4 in layer 1",
    }


# ---------------------------------------------------------------- IOI
NAMES = "mary john anna paul lisa mark emma tom kate sam lucy ben rose dan nina joe".split()
PLACES = "store park school garden station office".split()
OBJECTS = "drink book ball gift key letter".split()
IOI_WORDS = NAMES + PLACES + OBJECTS + "when and went to the , gave a".split()


def ioi(seed: int = 0, steps: int = 2000) -> dict:
    rng = np.random.default_rng(seed)
    tok = tokenizer(IOI_WORDS)
    vocab = tok.get_vocab()
    V = len(vocab)

    def sentence():
        a, b = rng.choice(NAMES, 2, replace=False)
        first = [a, b] if rng.random() < 0.5 else [b, a]  # ABBA or BABA
        words = [
            "when",
            first[0],
            "and",
            first[1],
            "went",
            "to",
            "the",
            str(rng.choice(PLACES)),
            ",",
            b,
            "gave",
            "a",
            str(rng.choice(OBJECTS)),
            "to",
            a,
        ]
        return [0] + [vocab[w] for w in words], 2 + 2 * first.index(a), 2 + 2 * first.index(b)

    def sample(bsz):
        ids = torch.tensor([sentence()[0] for _ in range(bsz)])
        mask = torch.ones_like(ids, dtype=torch.bool)
        return ids, mask

    model = llama(V, 3, seed=seed)
    log = train(model, lambda: sample(64), steps)
    held = [sentence() for _ in range(200)]
    ids = torch.tensor([h[0] for h in held])
    att = patterns(model, ids)
    end, s2 = ids.shape[1] - 2, 10  # "to" predicts the answer; the repeated name sits at 10
    b = np.arange(len(held))
    io_pos = np.array([h[1] for h in held])
    s1_pos = np.array([h[2] for h in held])
    mover = att[b, :, :, end, io_pos].mean(0)
    inhibit = att[b, :, :, end, s2].mean(0)
    dup = att[b, :, :, s2, s1_pos].mean(0)
    ind = att[b, :, :, s2, s1_pos + 1].mean(0)
    L = model.config.num_hidden_layers
    pick = lambda score: [(l, h) for l in range(L) for h in range(4) if score[l, h] >= 0.3]  # noqa: E731
    roles = {
        "name mover": pick(mover),
        "s-inhibition": pick(inhibit),
        "duplicate token": pick(dup),
        "induction": pick(ind),
    }
    circuit = sorted({x for v in roles.values() for x in v})
    examples = []
    for _ in range(24):
        ids1, _, s = sentence()
        examples.append({"ids": ids1[:-1], "token": ids1[-1], "foil": ids1[s]})
    return {
        "model": model,
        "tokenizer": tok,
        "examples": examples,
        "log": log,
        "circuit": circuit,
        "roles": roles,
        "edges": None,
        "scores": {
            "name mover": mover.round(4).tolist(),
            "s-inhibition": inhibit.round(4).tolist(),
            "duplicate token": dup.round(4).tolist(),
            "induction": ind.round(4).tolist(),
        },
        "description": (
            "IOI: a 3-layer Llama-style model (4 heads per layer, d = 64) trained on templated sentences "
            "'when A and B went to the P , B gave a O to A' (16 names, ABBA and BABA orders): the "
            "answer is the indirect object, the name not repeated. Examples: the sentence up to the "
            "last 'to', token the indirect object, foil the repeated subject."
        ),
        "found": "attention patterns on 200 held-out sentences: name movers mean α(end, IO) ≥ 0.3, s-inhibition "
        "α(end, S2) ≥ 0.3, duplicate-token α(S2, S1) ≥ 0.3, induction α(S2, S1 + 1) ≥ 0.3",
    }


# ---------------------------------------------------------------- first-token recall
def recall(seed: int = 0, steps: int = 600, heads: int = 8) -> dict:
    rng = np.random.default_rng(seed)
    words = SYLLABLES + ["="]
    V, N, eq = len(words) + 1, 16, len(words)  # BOS x noise (13) = → x

    def one():
        x, noise = int(rng.integers(1, eq)), rng.integers(1, eq, N - 3)
        return np.concatenate([[0, x], noise, [eq]]), x

    def sample(b):
        ids = torch.tensor(np.stack([np.concatenate([one()[0], [0]]) for _ in range(b)]))
        ids[:, -1] = ids[:, 1]  # the answer after "="
        mask = torch.zeros_like(ids, dtype=torch.bool)
        mask[:, -1] = True
        return ids, mask

    model = llama(V, 2, heads=heads, seed=seed)
    log = train(model, lambda: sample(64), steps)
    ids = torch.tensor(np.stack([one()[0] for _ in range(200)]))
    att = patterns(model, ids)  # [B, L, H, n, n]
    reads = att[:, :, :, -1, 1].mean(0)  # the "=" row's weight on x
    circuit = [(l, h) for l in range(2) for h in range(heads) if reads[l, h] >= 0.4]
    examples = []
    for _ in range(24):
        seq, x = one()
        foil = int(rng.choice([t for t in seq[2:-1].tolist() if t != x]))
        examples.append({"ids": seq.tolist(), "token": x, "foil": foil})
    return {
        "model": model,
        "tokenizer": tokenizer(words),
        "examples": examples,
        "log": log,
        "circuit": circuit,
        "roles": {"recall": circuit},
        "edges": None,
        "scores": {"recall": reads.round(4).tolist()},
        "description": (
            "Recall: a 2-layer Llama-style model (8 heads per layer, d = 64) trained on BOS x + 13 random "
            "syllables + '=', to answer x after '='. Heads that read x from the '=' position and copy it "
            "are the circuit. Examples: the sequence up to '=', token x, foil a syllable of the noise."
        ),
        "found": "attention patterns on 200 held-out sequences: mean α('=', x) ≥ 0.4",
    }


BENCHMARKS = {"induction": induction, "recall": recall, "ioi": ioi}


def ship(name: str, got: dict) -> None:
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    got["model"].save_pretrained(folder)
    got["tokenizer"].save_pretrained(folder)
    meta = {k: got[k] for k in ("description", "found", "roles", "scores", "examples")}
    meta["circuit"] = [list(x) for x in got["circuit"]]
    meta["roles"] = {k: [list(x) for x in v] for k, v in got["roles"].items()}
    meta["edges"] = got["edges"]
    meta["training"] = {
        "log": got["log"],
        "script": "scripts/train_circuits.py",
        "torch": torch.__version__,
        "transformers": tf.__version__,
    }
    (folder / "circuit.json").write_text(json.dumps(meta, indent=1))
    circuits.load.cache_clear()
    bench = circuits.load(name)
    result = circuits.check(bench)
    print(name, bench.circuit, result.text(), flush=True)
    meta["check"] = {
        "total": result.total,
        "circuit_removed": result.circuit_removed,
        "random_removed_mean": float(result.random_removed.mean()),
        "random_removed_max": float(result.random_removed.max()),
    }
    (folder / "circuit.json").write_text(json.dumps(meta, indent=1))
    if not (result.circuit_removed >= 0.5 and result.random_removed.max() <= 0.25):
        import shutil

        shutil.rmtree(folder)
        raise SystemExit(f"{name}: the circuit fails its check ({result.text()}); not shipped")


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    for name in argv or list(BENCHMARKS):
        ship(name, BENCHMARKS[name]())


if __name__ == "__main__":
    main(sys.argv[1:])

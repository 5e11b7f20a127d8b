"""Compile RASP programs with Tracr and ship them as known-circuit benchmarks under assets/circuits/ (CPU, ~1 min).

    python scripts/compile_tracr.py            # from the normviz venv: makes /tmp/tracr-venv if missing, compiles
                                               # there, converts here, checks, ships tracr_reverse and tracr_pattern

Tracr (pip ``tracr-pypi`` 1.0.0, with jax and dm-haiku) lives ONLY in a separate venv, never in normviz's: the script
runs itself there (``--compile FILE``: compile, write every program's weights, residual labels, RASP graph and
Tracr's own outputs on the examples to an .npz + .json), then converts in the normviz venv (torch, transformers):

    python3 -m venv /tmp/tracr-venv && /tmp/tracr-venv/bin/pip install tracr-pypi   # what the script runs

**The architecture.** Tracr's compiled blocks are GPT-2's without norms: token + position embeddings (a BOS token
first), per layer x + Attn(x), then x + MLP(x) (ReLU), residual, the answer read from a one-hot output subspace.
They are written into transformers' ``GPT2LMHeadModel`` (its eager attention returns the weights; normviz's
``gpt2`` row covers it, so every exact decomposition applies) with the three LayerNorms made identities to float
precision: one extra residual dimension holds minus the sum of the others (every write — embeddings, W^O, the
MLP's output, their biases — gets that column), so each token's mean is exactly 0 and the centring does nothing;
ε = 1e12 and γ = 1e6 make γ/√(Var + ε) = 1 to a relative 5e-13·Var (float32: exactly 1e-6 · 1e6). Tracr's
1/√key_size is folded into W^Q (GPT-2 divides by √head_dim); heads of unequal width are zero-padded. The unembedding
maps the output subspace: the logit of output value v is the residual's coordinate ``<program>:v`` (1 for Tracr's
answer, 0 for the rest), every other token's logit 0.

**The benchmarks.** A compiled program uses every head it has, so each benchmark is its program compiled beside
side programs in ONE model (residual subspaces side by side, heads of each layer concatenated; Tracr's own ``causal``
compilation, the HF model being causal): the side programs' heads run on the same tokens but the output does not
depend on them. The circuit is read from the compiled program's RASP graph: a head (an Aggregate or SelectorWidth
of Tracr's) is in the circuit when the RASP expression it writes is the output or one of its ancestors; MLPs are
listed alike. Direct head → head edges (a head reading a subspace another head writes) are the edges; where every
path between two heads runs through MLPs there are none (``edges`` null, the paths in circuit.json).

    tracr_reverse   make_reverse(tokens) (length by SelectorWidth, opp_idx by two MLPs, Aggregate): 2 heads;
                    beside it detect_pattern(tokens, "abc") (2 heads) and make_hist() (1 head)
    tracr_pattern   detect_pattern(tokens, "abc") (two shift_by heads, MLPs for == and &): 2 heads;
                    beside it make_hist() and make_length() (1 head each)

Checks before shipping (the script refuses otherwise): the converted model reproduces Tracr's own compiled output
subspace at every position of every example (max |difference| printed, ≤ 1e-4), Tracr's decoded answer at the last
position equals RASP's evaluation, and normviz.circuits.check passes (ablating the circuit removes ≥ 50 %, as many
other heads ≤ 25 %).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VENV = Path("/tmp/tracr-venv")
VOCAB = ["a", "b", "c", "d"]
MAX_LEN = 5
EPS = 1e12
# name: (main program, [(side program, layer offset)], examples' rule)
BENCHMARKS = {
    "tracr_reverse": ("reverse", [("pattern", 1), ("hist", 0)]),
    "tracr_pattern": ("pattern", [("hist", 0), ("length", 2)]),
}
DESCRIPTIONS = {
    "reverse": "make_reverse(tokens): length by a SelectorWidth head (+ its MLP), opp_idx = length − index − 1 by two "
    "MLPs, then an Aggregate head reads the token at opp_idx; at the last position the answer is the first token",
    "pattern": 'detect_pattern(tokens, "abc"): MLPs compute token == a, == b, == c; two shift_by heads carry the first '
    "two back by 2 and 1 positions; MLPs AND them: True at a position that ends a b c",
}


# ---------------------------------------------------------------- stage 1: in the tracr venv
def _programs():
    from tracr.compiler import lib
    from tracr.rasp import rasp

    return {
        "reverse": lambda: lib.make_reverse(rasp.tokens),
        "pattern": lambda: lib.detect_pattern(rasp.tokens, "abc"),
        "hist": lib.make_hist,
        "length": lib.make_length,
    }


def _sequences(main: str, rng, count: int) -> list[list[str]]:
    out = []
    while len(out) < count:
        n = int(rng.integers(3, MAX_LEN + 1))
        seq = [str(x) for x in rng.choice(VOCAB, n)]
        if main == "pattern" and len(out) % 2 == 0:  # half of them end in the pattern
            seq[-3:] = ["a", "b", "c"]
        if main == "reverse" and len(set(seq)) < 2:
            continue
        out.append(seq)
    return out


def compile_all(path: Path) -> None:
    """Compile every program (one process: RASP labels unique), write weights + metadata + Tracr's outputs."""
    import jax
    from tracr.compiler import compiling, rasp_to_graph
    from tracr.rasp import rasp

    arrays, meta = {}, {"programs": {}, "benchmarks": {}}
    programs = _programs()
    compiled = {}
    for name, make in programs.items():
        prog = make()
        m = compiling.compile_rasp_to_model(
            prog, vocab=set(VOCAB), max_seq_len=MAX_LEN, compiler_bos="BOS", causal=True
        )
        assert m.model_config.activation_function is jax.nn.relu and not m.model_config.layer_norm
        g = rasp_to_graph.extract_rasp_graph(prog).graph
        compiled[name] = (prog, m)
        for k, v in m.params.items():
            for kk, vv in v.items():
                arrays[f"{name}/{k}/{kk}"] = np.asarray(vv, dtype=np.float64)
        meta["programs"][name] = {
            "label": prog.label,
            "labels": list(m.residual_labels),
            "layers": m.model_config.num_layers,
            "heads": m.model_config.num_heads,
            "key_size": m.model_config.key_size,
            "encoding": {str(k): int(v) for k, v in m.input_encoder.encoding_map.items()},
            "outputs": [str(k) for k in m.output_encoder.encoding_map],
            "graph": [[str(a), str(b)] for a, b in g.edges],
        }
    rng = np.random.default_rng(0)
    for bench, (main, _) in BENCHMARKS.items():
        prog, m = compiled[main]
        rows = []
        for seq in _sequences(main, rng, 24):
            out = m.apply(["BOS"] + seq)
            label = meta["programs"][main]["labels"]
            cols = [label.index(f"{prog.label}:{v}") for v in meta["programs"][main]["outputs"]]
            values = np.asarray(out.transformer_output[0])[:, cols]  # [T, outputs]: Tracr's output subspace
            rasp_answer = rasp.evaluate(prog, seq)[-1]
            assert str(out.decoded[-1]) == str(rasp_answer), (seq, out.decoded, rasp_answer)
            rows.append({"seq": seq, "answer": str(rasp_answer), "values": values.tolist()})
        meta["benchmarks"][bench] = rows
    np.savez(path.with_suffix(".npz"), **arrays)
    path.with_suffix(".json").write_text(json.dumps(meta))


# ---------------------------------------------------------------- stage 2: in the normviz venv
def _heads(arrays, name: str, prog: dict, layer: int) -> list[dict]:
    """The layer's heads that do something (W^QK or W^OV nonzero), each with its weights and what it reads/writes."""
    ks, labels, out = prog["key_size"], prog["labels"], []
    p = f"{name}/transformer/layer_{layer}/attn"
    for h in range(prog["heads"]):
        cols = slice(h * ks, (h + 1) * ks)
        w = {k: arrays[f"{p}/{k}/w"][:, cols] for k in ("query", "key", "value")}
        b = {k: arrays[f"{p}/{k}/b"][cols] for k in ("query", "key", "value")}
        wo = arrays[f"{p}/linear/w"][cols]
        if not (np.abs(w["query"]).sum() or np.abs(wo).sum()):
            continue
        reads = {labels[i] for k in w for i in np.flatnonzero(np.abs(w[k]).sum(1))}
        writes = {labels[i] for i in np.flatnonzero(np.abs(wo).sum(0))}
        out.append({"w": w, "b": b, "wo": wo, "reads": reads, "writes": writes, "ks": ks})
    return out


def _mlp(arrays, name: str, prog: dict, layer: int) -> dict | None:
    p = f"{name}/transformer/layer_{layer}/mlp"
    w1, b1, w2 = arrays[f"{p}/linear_1/w"], arrays[f"{p}/linear_1/b"], arrays[f"{p}/linear_2/w"]
    used = np.flatnonzero(np.abs(w1).sum(0) + np.abs(w2).sum(1))
    if not used.size:
        return None
    labels = prog["labels"]
    return {
        "w1": w1[:, used],
        "b1": b1[used],
        "w2": w2[used],
        "writes": {labels[i] for i in np.flatnonzero(np.abs(w2).sum(0))},
    }


def _node(label: str) -> str:
    """The RASP expression a residual label belongs to ('reverse_1:a' → 'reverse_1')."""
    return label.split(":")[0].removesuffix("_selector_width_attn_output")


def _ancestors(graph: list, sink: str) -> set[str]:
    parents: dict[str, set[str]] = {}
    for a, b in graph:
        parents.setdefault(b, set()).add(a)
    seen, todo = {sink}, [sink]
    while todo:
        for a in parents.get(todo.pop(), ()):
            if a not in seen:
                seen.add(a)
                todo.append(a)
    return seen


def build(bench: str, arrays, meta) -> tuple:
    """The GPT-2 model, tokenizer, token ids, circuit and roles of one benchmark."""
    import torch
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers

    main, sides = BENCHMARKS[bench]
    parts = [(main, 0)] + sides
    progs = {n: meta["programs"][n] for n, _ in parts}
    encodings = {json.dumps(p["encoding"], sort_keys=True) for p in progs.values()}
    assert len(encodings) == 1, "the programs must share Tracr's input encoding"
    enc = progs[main]["encoding"]
    # token ids: BOS, the input vocabulary, then output values that are not input tokens
    words = ["BOS"] + VOCAB + [v for v in progs[main]["outputs"] if v not in VOCAB]
    ids = {w: i for i, w in enumerate(words)}
    offsets, start = {}, 0
    for n, _ in parts:
        offsets[n] = start
        start += len(progs[n]["labels"])
    balance = start  # the dimension holding minus the others' sum
    L = max(progs[n]["layers"] + off for n, off in parts)
    layers = []  # per layer: [(program, head)], [(program, mlp)]
    for layer in range(L):
        hs, ms = [], []
        for n, off in parts:
            if 0 <= layer - off < progs[n]["layers"]:
                hs += [(n, h) for h in _heads(arrays, n, progs[n], layer - off)]
                m = _mlp(arrays, n, progs[n], layer - off)
                if m is not None:
                    ms.append((n, m))
        layers.append((hs, ms))
    H = max(1, max(len(hs) for hs, _ in layers))
    need = balance + 1
    head_dim = max(max(p["key_size"] for p in progs.values()), -(-need // H))
    D = H * head_dim
    F = max(1, max(sum(m["w1"].shape[1] for _, m in ms) for _, ms in layers))
    config = tf.GPT2Config(
        vocab_size=len(words),
        n_positions=MAX_LEN + 1,
        n_embd=D,
        n_layer=L,
        n_head=H,
        n_inner=F,
        activation_function="relu",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=EPS,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    config._attn_implementation = "eager"
    model = tf.GPT2LMHeadModel(config).to(torch.float64)

    def write(rows: np.ndarray, n: str) -> np.ndarray:
        """Rows written into program n's subspace of the residual, with the balancing column."""
        out = np.zeros((rows.shape[0], D))
        out[:, offsets[n] : offsets[n] + rows.shape[1]] = rows
        out[:, balance] = -out.sum(1)
        return out

    def read(cols: np.ndarray, n: str) -> np.ndarray:
        out = np.zeros((D, cols.shape[1]))
        out[offsets[n] : offsets[n] + cols.shape[0]] = cols
        return out

    wte = np.zeros((len(words), D))
    wpe = np.zeros((MAX_LEN + 1, D))
    for n, _ in parts:
        te = arrays[f"{n}/token_embed/embeddings"]
        rows = np.zeros((len(words), te.shape[1]))
        for w, i in enc.items():
            if w in ids:
                rows[ids[w]] = te[i]
        wte += write(rows, n)
        wpe += write(arrays[f"{n}/pos_embed/embeddings"], n)
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    sd = {"transformer.wte.weight": t(wte), "transformer.wpe.weight": t(wpe)}
    roles: dict[str, list] = {}
    circuit, mlps, writers = [], [], {}
    keep = _ancestors(progs[main]["graph"], progs[main]["label"])
    for layer, (hs, ms) in enumerate(layers):
        c_attn = np.zeros((D, 3 * D))
        c_attn_b = np.zeros(3 * D)
        c_proj = np.zeros((D, D))
        c_proj_b = np.zeros(D)
        for h, (n, head) in enumerate(hs):
            ks = head["ks"]
            scale = np.sqrt(head_dim / ks)  # GPT-2 divides the score by √head_dim, Tracr by √key_size
            for j, k in enumerate(("query", "key", "value")):
                cols = slice(j * D + h * head_dim, j * D + h * head_dim + ks)
                c_attn[:, cols] = read(head["w"][k], n) * (scale if k == "query" else 1.0)
                c_attn_b[cols] = head["b"][k] * (scale if k == "query" else 1.0)
            c_proj[h * head_dim : h * head_dim + ks] = write(head["wo"], n)
            what = sorted({_node(x) for x in head["writes"]})
            role = f"{n}: {', '.join(what)}"
            roles.setdefault(role, []).append([layer, h])
            writers.update({x: (layer, h) for x in head["writes"]})
            head["at"] = (layer, h)
            if n == main and set(what) <= keep:
                circuit.append([layer, h])
        for n, off in parts:  # Tracr's attention output bias (zero in practice), per program
            if 0 <= layer - off < progs[n]["layers"]:
                c_proj_b += write(arrays[f"{n}/transformer/layer_{layer - off}/attn/linear/b"][None], n)[0]
        fc = np.zeros((D, F))
        fc_b = np.zeros(F)
        proj = np.zeros((F, D))
        proj_b = np.zeros(D)
        u = 0
        for n, m in ms:
            k = m["w1"].shape[1]
            fc[:, u : u + k] = read(m["w1"], n)
            fc_b[u : u + k] = m["b1"]
            proj[u : u + k] = write(m["w2"], n)
            u += k
            if n == main and {_node(x) for x in m["writes"]} <= keep:
                mlps.append(layer)
        for n, off in parts:
            if 0 <= layer - off < progs[n]["layers"]:
                proj_b += write(arrays[f"{n}/transformer/layer_{layer - off}/mlp/linear_2/b"][None], n)[0]
        pre = f"transformer.h.{layer}."
        sd |= {
            pre + "attn.c_attn.weight": t(c_attn),
            pre + "attn.c_attn.bias": t(c_attn_b),
            pre + "attn.c_proj.weight": t(c_proj),
            pre + "attn.c_proj.bias": t(c_proj_b),
            pre + "mlp.c_fc.weight": t(fc),
            pre + "mlp.c_fc.bias": t(fc_b),
            pre + "mlp.c_proj.weight": t(proj),
            pre + "mlp.c_proj.bias": t(proj_b),
        }
        for ln in ("ln_1", "ln_2"):
            sd |= {pre + f"{ln}.weight": t(np.full(D, np.sqrt(EPS))), pre + f"{ln}.bias": t(np.zeros(D))}
    sd |= {"transformer.ln_f.weight": t(np.full(D, np.sqrt(EPS))), "transformer.ln_f.bias": t(np.zeros(D))}
    lm_head = np.zeros((len(words), D))
    labels = progs[main]["labels"]
    for v in progs[main]["outputs"]:
        lm_head[ids[v], offsets[main] + labels.index(f"{progs[main]['label']}:{v}")] = 1.0
    sd["lm_head.weight"] = t(lm_head)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and all("attn.bias" in k or "masked_bias" in k for k in missing), (missing, unexpected)
    edges = []
    for hs, _ in layers:
        for _, b in hs:
            for _, a in (x for hs2, _ in layers for x in hs2):
                if a["at"][0] < b["at"][0] and a["writes"] & b["reads"] and list(a["at"]) in circuit:
                    edges.append([list(a["at"]), list(b["at"])])
    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="BOS"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = tf.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="BOS", unk_token="BOS", model_max_length=MAX_LEN + 1
    )
    shape = {"layers": L, "heads": H, "head_dim": head_dim, "d_model": D, "d_ff": F, "used_dims": need}
    return model, tokenizer, ids, sorted(circuit), sorted(set(mlps)), roles, edges, shape


def convert(bench: str, arrays, meta) -> dict:
    """Build, check against Tracr's own outputs and ship one benchmark; returns its circuit.json."""
    import torch

    from normviz import circuits

    model, tokenizer, ids, circuit, mlps, roles, edges, shape = build(bench, arrays, meta)
    main = BENCHMARKS[bench][0]
    outputs = meta["programs"][main]["outputs"]
    out_ids = [ids[v] for v in outputs]
    examples, worst = [], 0.0
    rng = np.random.default_rng(1)
    for row in meta["benchmarks"][bench]:
        x = [0] + [ids[w] for w in row["seq"]]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([x])).logits[0].numpy()
        worst = max(worst, float(np.abs(logits[:, out_ids] - np.asarray(row["values"])).max()))
        token = ids[row["answer"]]
        others = [ids[v] for v in outputs if ids[v] != token]
        present = [i for i in others if i in x[1:]]  # a foil from the input where there is one (reverse)
        foil = int(rng.choice(present or others))
        examples.append({"ids": x, "token": token, "foil": foil, "tokens": ["BOS"] + row["seq"]})
    print(f"{bench}: max |converted − Tracr| over the output subspace, all positions: {worst:.2e}", flush=True)
    if worst > 1e-4:
        raise SystemExit(f"{bench}: the converted model does not reproduce Tracr's outputs ({worst:.2e})")
    main_desc = DESCRIPTIONS[main]
    sides = ", ".join(f"{n} (its layer 0 at layer {off})" for n, off in BENCHMARKS[bench][1])
    meta_out = {
        "description": (
            f"Tracr-compiled (causal, BOS, vocabulary {' '.join(VOCAB)}, up to {MAX_LEN} tokens): {main_desc}. "
            f"Compiled beside side programs whose heads the answer does not depend on: {sides}; one GPT-2-shaped "
            f"model, no norms in effect (LayerNorms made identities), ReLU MLPs. The logit of an output value is the "
            f"residual's coordinate of that value in the program's output subspace (1 for the answer). Examples: "
            f"BOS + a random sequence, token the answer at the last position, foil another output value."
        ),
        "found": "read from the compiled program's RASP graph: the heads and MLPs that write the output or one of "
        "its ancestors (scripts/compile_tracr.py)",
        "roles": roles,
        "mlps": mlps,
        "examples": examples,
        "circuit": circuit,
        "edges": edges or None,
        "paths": "every path between circuit heads runs through MLPs" if not edges else "direct",
        "tracr": {
            "script": "scripts/compile_tracr.py",
            "package": "tracr-pypi 1.0.0",
            "programs": {n: meta["programs"][n]["label"] for n, _ in [(main, 0)] + BENCHMARKS[bench][1]},
            "max_abs_difference": worst,
            "shape": shape,
            "layernorm": {"epsilon": EPS, "weight": float(np.sqrt(EPS)), "balancing_dimension": shape["used_dims"] - 1},
        },
    }
    folder = ROOT / "assets" / "circuits" / bench
    folder.mkdir(parents=True, exist_ok=True)
    model.to(torch.float32).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "circuit.json").write_text(json.dumps(meta_out, indent=1))
    circuits.load.cache_clear()
    got = circuits.check(circuits.load(bench))
    print(bench, circuit, got.text(), flush=True)
    meta_out["check"] = {
        "total": got.total,
        "circuit_removed": got.circuit_removed,
        "random_removed_mean": float(got.random_removed.mean()),
        "random_removed_max": float(got.random_removed.max()),
    }
    (folder / "circuit.json").write_text(json.dumps(meta_out, indent=1))
    if not (got.circuit_removed >= 0.5 and got.random_removed.max() <= 0.25):
        raise SystemExit(f"{bench}: the circuit fails its check ({got.text()})")
    return meta_out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compile", help="(inside the tracr venv) write the compiled programs to this path")
    ap.add_argument("--venv", default=str(VENV))
    args = ap.parse_args(argv)
    if args.compile:
        compile_all(Path(args.compile))
        return
    venv = Path(args.venv)
    if not (venv / "bin" / "python").exists():
        subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "tracr-pypi==1.0.0"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "compiled"
        subprocess.run([str(venv / "bin" / "python"), __file__, "--compile", str(path)], check=True)
        arrays = dict(np.load(path.with_suffix(".npz")))
        meta = json.loads(path.with_suffix(".json").read_text())
    sys.path.insert(0, str(ROOT))
    for bench in BENCHMARKS:
        convert(bench, arrays, meta)


if __name__ == "__main__":
    main()

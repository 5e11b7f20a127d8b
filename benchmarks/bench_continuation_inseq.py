"""normviz's batched continuation attribution beside inseq's (issue 39) at a 64-token prompt + 32 generated tokens.

    python benchmarks/bench_continuation_inseq.py --inseq /tmp/inseq-venv/bin/python [--model tiny|smollm2]
        [--prompt 64] [--steps 32] [--ig-steps 50]

inseq (Sarti et al. 2023) is never a dependency of normviz: it runs in its own virtual environment (``--inseq``,
e.g. ``python -m venv /tmp/inseq-venv; /tmp/inseq-venv/bin/pip install torch==2.13.0 inseq``), in a child process
that imports no normviz (this file with ``--inseq-worker``). Both sides read the same ``save_pretrained`` dir:
``--model tiny`` (default) a 4-layer Llama with random weights (seed 0) and smollm2's tokenizer, written to
``--model-dir``; ``--model smollm2`` the embedded smollm2. Both attribute the same teacher-forced continuation
(the next T tokens of the benchmarks' text: a known answer, so both see exactly the same ids) to every earlier
token, each step's target being the step's logit:

- normviz: a fresh Session + ``explain_continuation(continuation=ids)`` (one recording pass, one batched adjoint);
- inseq: ``saliency`` (|gradient|), ``input_x_gradient`` and ``integrated_gradients`` (``--ig-steps``, inseq's
  default baseline) with ``attributed_fn="logit"``; inseq attributes step by step.

Reported, all from one run: wall seconds and seconds in forward passes of that process (a plain forward pass
over prompt + continuation, timed there), the ratio inseq / normviz, the completeness gap
|Σ tokens − logit| / |logit| per step, and where the values are comparable, how close: Pearson r between each
step's normviz row and inseq's signed row (input × gradient, IG), Spearman ρ against |normviz| for saliency
(median over steps). The machine's load is printed: a shared machine's timings are noisy, so the ratio is the figure.

Measured once (round 5; --model tiny, 64 + 32, IG 50 steps; 2 shared cores at load 11 → 7; inseq 0.7.1):
normviz 1.12 s (4.4 forward passes; completeness gap median 3.7e-7); inseq saliency 20.3 s (18.2× normviz;
Spearman ρ vs |normviz| 0.66), input × gradient 18.8 s (16.8×; gap median 1.11; Pearson r 0.23), integrated
gradients 491 s (440×; gap median 1.22, which IG's own completeness would put at logit(input) − logit(baseline);
Pearson r 0.70).
On smollm2 (round 5, --model smollm2 --prompt 16 --steps 8 --methods input_x_gradient,integrated_gradients; load
13 → 10; 64 + 32 would take IG about 1.5 h of this shared machine, 4× the token-steps of 32 + 16): normviz 4.89 s (3.7
forward passes; gap median 2.7e-7, max 6.1e-7); inseq input × gradient 15.8 s (3.2× normviz; 15.5 forward passes
in its process; gap median 0.83, max 1.08; Pearson r vs normviz −0.21), integrated gradients 339 s (69×; 332
forward passes; gap median 1.96, max 3.33; Pearson r −0.15). At --prompt 32 --steps 16 (load 9 → 11): normviz
20.8 s (7.8 forward passes; gap 3.0e-7), input × gradient 48.2 s (2.3×; gap 0.89; r −0.11), integrated gradients
1,464 s (70×; gap median 4.36, max 66.9; r −0.07). benchmarks/results/continuation_inseq_smollm2.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
METHODS = ("saliency", "input_x_gradient", "integrated_gradients")


# ---------------------------------------------------------------- inseq's side (its own venv: no normviz import)
def inseq_worker(job_path: str) -> None:
    import inseq
    import numpy as np
    from bench_continuation import inseq_loaded  # this folder is on sys.path: the worker runs as a script here

    job, tok, model, prompt, full, ids, out = inseq_loaded(job_path)
    for method in job["methods"]:
        kw = {"n_steps": job["ig_steps"]} if method == "integrated_gradients" else {}
        m = inseq.load_model(model, method, tokenizer=tok)
        t0 = time.perf_counter()
        res = m.attribute(
            input_texts=prompt,
            generated_texts=full,
            attributed_fn="logit",
            show_progress=False,
            skip_special_tokens=False,
            **kw,
        )
        seconds = time.perf_counter() - t0
        seq = res.sequence_attributions[0]
        attr = seq.target_attributions  # [tokens, steps, hidden]: raw, before inseq's aggregation
        attr = attr.sum(-1) if attr.dim() == 3 else attr
        rows = attr.double().numpy().T  # [steps, tokens]
        scores = seq.step_scores or {}
        out[method] = {
            "seconds": seconds,
            "rows": np.where(np.isfinite(rows), rows, np.nan).tolist(),
            "step_scores": {k: v.double().tolist() for k, v in scores.items()},
        }
    print(json.dumps(out))


# ---------------------------------------------------------------- normviz's side
def tiny_dir(path: str) -> str:
    """A 4-layer Llama with random weights (seed 0) and smollm2's tokenizer, saved once to ``path``."""
    import torch
    import transformers as tf

    from normviz.models.loading import SMOLLM2_CONVERTED, cache_dir

    if os.path.exists(os.path.join(path, "config.json")):
        return path
    tok = tf.AutoTokenizer.from_pretrained(str(cache_dir() / SMOLLM2_CONVERTED))
    cfg = tf.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inseq", default=None, metavar="PYTHON", help="a Python with inseq installed")
    ap.add_argument("--model", choices=("tiny", "smollm2"), default="tiny")
    ap.add_argument("--model-dir", default=os.path.join(tempfile.gettempdir(), "normviz-bench-tiny-llama"))
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--ig-steps", type=int, default=50)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--inseq-worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inseq_worker:
        return inseq_worker(args.inseq_worker)
    sys.path.insert(0, os.path.join(HERE, ".."))
    sys.path.insert(0, HERE)
    import numpy as np
    import torch
    from bench_explain import encode_exactly

    import normviz
    from normviz.models.loading import SMOLLM2_CONVERTED, cache_dir
    from normviz.session.session import Session

    model_dir = str(cache_dir() / SMOLLM2_CONVERTED) if args.model == "smollm2" else tiny_dir(args.model_dir)
    lm = normviz.load(model_dir if args.model == "tiny" else "smollm2", device="cpu")
    n, T = args.prompt, args.steps
    ids = list(encode_exactly(lm, n + T).ids)
    back = lm.tokenizer(lm.tokenizer.decode(ids), add_special_tokens=False)["input_ids"]
    if back != ids:
        sys.exit("the text's ids do not survive a text round trip (inseq takes texts): pick another --prompt")
    prompt_ids, cont = ids[:n], ids[n:]
    enc = encode_exactly(lm, n)
    assert list(enc.ids) == prompt_ids
    print(
        f"# {args.model} ({model_dir}), torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"load {os.getloadavg()[0]:.2f}; prompt {n} tokens + {T} teacher-forced steps",
        flush=True,
    )
    full = torch.tensor([ids])

    def forward():
        with torch.no_grad():
            lm.head_model(input_ids=full, use_cache=False)

    forward()
    t0 = time.perf_counter()
    for _ in range(3):
        forward()
    f = (time.perf_counter() - t0) / 3
    Session.from_encoded(lm, [enc])[0].explain_continuation(continuation=cont)  # first-call costs
    t0 = time.perf_counter()
    c = Session.from_encoded(lm, [enc])[0].explain_continuation(continuation=cont)
    ours = time.perf_counter() - t0
    assert c.generated_ids.tolist() == cont
    with torch.no_grad():
        logits = lm.head_model(input_ids=full).logits[0].double().numpy()
    want = np.array([logits[n - 1 + t, tok] for t, tok in enumerate(cont)])
    ours_rows = np.asarray(c.sources, dtype=np.float64)  # [T, n + T − 1]
    gap = np.abs(np.nansum(ours_rows, 1) + c.bias - want) / np.abs(want)
    print(
        f"  normviz explain_continuation {ours:9.2f} s {ours / f:8.1f} forward passes (forward {f * 1e3:.0f} ms)  "
        f"completeness gap median {np.median(gap):.1e}, max {gap.max():.1e}",
        flush=True,
    )
    if not args.inseq:
        return
    job = {
        "model_dir": model_dir,
        "prompt_ids": prompt_ids,
        "continuation_ids": cont,
        "threads": torch.get_num_threads(),
        "methods": args.methods.split(","),
        "ig_steps": args.ig_steps,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(job, fh)
    r = subprocess.run([args.inseq, __file__, "--inseq-worker", fh.name], capture_output=True, text=True)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not line:
        sys.exit(f"inseq failed: {r.stderr[-3000:]}")
    res = json.loads(line[-1])
    fi = res["forward_s"]
    print(
        f"  inseq {res['inseq']} (torch {res['torch']}, its own process; forward {fi * 1e3:.0f} ms there; text "
        f"round trip {'exact' if res['roundtrip'] else 'NOT exact'})"
    )
    from scipy.stats import pearsonr, spearmanr

    summary = {"normviz_s": ours, "normviz_forward_passes": ours / f, "normviz_gap_median": float(np.median(gap))}
    for method in job["methods"]:
        m = res[method]
        rows = np.array(m["rows"], dtype=np.float64)  # [steps, tokens (n + T)]
        k = min(len(rows), T)
        sums = np.nansum(rows[:k], 1)
        g = np.abs(sums - want[:k]) / np.abs(want[:k])
        close = []
        for t in range(k):
            upto = n + t  # the tokens step t reads: 0 … n − 1 + t
            a, b = ours_rows[t, :upto], np.nan_to_num(rows[t, :upto])
            if method == "saliency":
                close.append(spearmanr(np.abs(a), np.abs(b))[0])
            else:
                close.append(pearsonr(a, b)[0])
        what = "Spearman ρ vs |normviz|" if method == "saliency" else "Pearson r vs normviz"
        gap_text = (
            "(|gradient|: no completeness)"
            if method == "saliency"
            else (f"completeness gap median {np.median(g):.2f}, max {g.max():.2f}")
        )
        print(
            f"  inseq {method:22s} {m['seconds']:9.2f} s {m['seconds'] / fi:8.1f} forward passes  "
            f"{m['seconds'] / ours:7.1f}× normviz  {gap_text};  {what}: median {np.nanmedian(close):.2f} "
            f"({k} steps)",
            flush=True,
        )
        summary[method] = {
            "seconds": m["seconds"],
            "forward_passes": m["seconds"] / fi,
            "ratio": m["seconds"] / ours,
            "gap_median": float(np.median(g)),
            "close_median": float(np.nanmedian(close)),
        }
    print(f"# load after {os.getloadavg()[0]:.2f}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

"""A whole continuation explained (issue 39), in units of the model's own forward pass over the whole sequence.

    python benchmarks/bench_continuation.py [--prompt 64] [--steps 32] [--repeat 3]
    python benchmarks/bench_continuation.py --long 1024 --long-steps 64     # once, in a fresh process: peak RSS
    python benchmarks/bench_continuation.py --inseq /tmp/inseq-venv/bin/python   # + inseq, side by side

Timed, alternated in one process (:func:`benchmarks.timing.alternate`), medians:
  forward       one plain forward pass of smollm2 with its LM head over prompt + continuation (n + T tokens, no
                hooks, no cache): the unit
  generate      transformers' ``generate(do_sample=False)`` of the T tokens (KV cache): part of the next line
  continuation  a FRESH Session + ``explain_continuation(T)``: the greedy generation, one recording pass over
                prompt + continuation, the direct parts and ONE batched backward pass for the T targets
  given         the same with the continuation given (teacher-forced: no generation)
Target (the issue): continuation ≤ T + 3 forward passes. ``--long``: a 1,024-token prompt with T = 64 run once
in a child process, which reports its peak RSS (target ≤ 6 GB) and time.

``--inseq PYTHON``: the same continuation attributed by inseq (Sarti et al. 2023) in its own virtual environment
(inseq is never a dependency of normviz): ``integrated_gradients`` (50 steps) and ``input_x_gradient`` with
``attributed_fn="logit"``, each timed once against a plain forward pass in that process, and their
completeness gap: |Σ_tokens attribution − the step's logit| / |logit| per step (normviz: Σ sources + bias =
logit, up to float32 rounding). The child runs this file with ``--inseq-worker``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------- inseq's side (its own venv: no normviz import)
def inseq_loaded(job_path: str):
    """inseq's side, set up: the job, the tokenizer and the eager float32 model of ``job["model_dir"]``, the prompt
    and prompt + continuation as text, their ids, and ``out`` (versions, the text round trip, ``forward_s``: the
    mean of 3 plain forward passes after a warm-up). Shared by bench_continuation_inseq's worker."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with open(job_path) as fh:
        job = json.load(fh)
    torch.set_num_threads(job["threads"])
    tok = AutoTokenizer.from_pretrained(job["model_dir"])
    model = AutoModelForCausalLM.from_pretrained(
        job["model_dir"], attn_implementation="eager", dtype=torch.float32
    ).eval()
    prompt_ids, cont_ids = job["prompt_ids"], job["continuation_ids"]
    prompt, full = tok.decode(prompt_ids), tok.decode(prompt_ids + cont_ids)
    ids = torch.tensor([prompt_ids + cont_ids])
    from importlib.metadata import version

    out = {
        "inseq": version("inseq"),
        "torch": torch.__version__,
        "roundtrip": tok(full, add_special_tokens=False)["input_ids"] == prompt_ids + cont_ids,
    }

    def forward():
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)

    forward()
    t0 = time.perf_counter()
    for _ in range(3):
        forward()
    out["forward_s"] = (time.perf_counter() - t0) / 3
    return job, tok, model, prompt, full, ids, out


def inseq_worker(job_path: str) -> None:
    import inseq
    import numpy as np
    import torch

    job, tok, model, prompt, full, ids, out = inseq_loaded(job_path)
    prompt_ids, cont_ids = job["prompt_ids"], job["continuation_ids"]
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0]
    n = len(prompt_ids)
    want = np.array([float(logits[n - 1 + t, c]) for t, c in enumerate(cont_ids)])
    for method, kw in (("input_x_gradient", {}), ("integrated_gradients", {"n_steps": 50})):
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
        attr = seq.target_attributions  # [tokens, steps, hidden]: raw, before inseq's (unsigned) aggregation
        attr = attr.sum(-1) if attr.dim() == 3 else attr
        sums = np.nan_to_num(attr.double().numpy()).sum(0)  # Σ over tokens per step
        k = min(len(sums), len(want))
        gap = np.abs(sums[:k] - want[:k]) / np.abs(want[:k])
        out[method] = {
            "seconds": seconds,
            "ratio": seconds / out["forward_s"],
            "steps": len(sums),
            "gap_median": float(np.median(gap)),
            "gap_max": float(gap.max()),
        }
    print(json.dumps(out))


# ---------------------------------------------------------------- normviz's side
def _setup():
    sys.path.insert(0, os.path.join(HERE, ".."))
    sys.path.insert(0, HERE)


def long_once(n: int, steps: int) -> None:
    """One fresh continuation explanation of an n-token prompt, then this process's peak RSS (a child: its own)."""
    _setup()
    from bench_explain import encode_exactly

    import normviz
    from normviz.session.session import Session

    lm = normviz.load("smollm2", device="cpu")
    enc = encode_exactly(lm, n)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    t0 = time.perf_counter()
    c = Session.from_encoded(lm, [enc])[0].explain_continuation(steps)
    seconds = time.perf_counter() - t0
    gap = float(
        abs(c.sources[-1][~__import__("numpy").isnan(c.sources[-1])].sum() + c.bias[-1] - c.totals[-1])
        / abs(c.totals[-1])
    )
    print(
        json.dumps(
            {
                "n": len(enc.ids),
                "steps": len(c),
                "seconds": seconds,
                "batches": c.batches,
                "peak_rss_gib_after_load": rss0,
                "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                "last_row_gap": gap,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--long", type=int, default=None, help="also: a prompt of this many tokens once, in a child")
    ap.add_argument("--long-steps", type=int, default=64)
    ap.add_argument("--inseq", default=None, metavar="PYTHON", help="a Python with inseq installed")
    ap.add_argument("--inseq-prompt", type=int, default=None, help="inseq's prompt length (default --prompt)")
    ap.add_argument("--inseq-steps", type=int, default=None, help="inseq's steps (default --steps)")
    ap.add_argument("--only-inseq", action="store_true", help="only the side by side with inseq")
    ap.add_argument("--inseq-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--long-child", nargs=2, type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inseq_worker:
        return inseq_worker(args.inseq_worker)
    if args.long_child:
        return long_once(*args.long_child)
    _setup()
    import numpy as np
    import torch
    from bench_explain import encode_exactly
    from timing import alternate

    import normviz
    from normviz.session.session import Session

    print(
        f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} "
        f"threads, load {os.getloadavg()[0]:.2f}"
    )
    lm = normviz.load("smollm2", device="cpu")
    if args.only_inseq:
        return side_by_side(lm, args)
    enc = encode_exactly(lm, args.prompt)
    T = args.steps
    ref = Session.from_encoded(lm, [enc])[0].explain_continuation(T)
    cont = ref.generated_ids.tolist()
    full = torch.tensor([enc.ids + cont])
    x = torch.tensor([enc.ids])

    def forward():
        with torch.no_grad():
            lm.head_model(input_ids=full, use_cache=False)

    def generate():
        with torch.no_grad():
            lm.head_model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=T, do_sample=False)

    steps = {
        "forward": forward,
        "generate": generate,
        "continuation": lambda: Session.from_encoded(lm, [enc])[0].explain_continuation(T),
        "given": lambda: Session.from_encoded(lm, [enc])[0].explain_continuation(continuation=cont),
    }
    _, med = alternate(steps, args.repeat)
    f = med["forward"]
    gaps = [abs(np.nansum(ref.sources[t]) + ref.bias[t] - ref.totals[t]) / abs(ref.totals[t]) for t in range(len(ref))]
    print(
        f"prompt {len(enc.ids)} tokens, T = {len(ref)} steps ({ref.note}); forward over {full.shape[1]} tokens "
        f"{f * 1e3:.0f} ms"
    )
    for k, v in med.items():
        print(f"  {k:13s} {v:8.3f} s  {v / f:6.1f} forward passes", flush=True)
    print(
        f"  target: continuation ≤ T + 3 = {len(ref) + 3} forward passes: "
        f"{'met' if med['continuation'] / f <= len(ref) + 3 else 'NOT met'}"
    )
    print(
        f"  normviz completeness gap |Σ sources + bias − logit| / |logit|: median {np.median(gaps):.1e}, "
        f"max {max(gaps):.1e}"
    )
    print(f"# load after {os.getloadavg()[0]:.2f}", flush=True)
    if args.long:
        r = subprocess.run(
            [sys.executable, __file__, "--long-child", str(args.long), str(args.long_steps)],
            capture_output=True,
            text=True,
        )
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        print(f"long: {line[-1] if line else r.stderr[-2000:]}")
    if args.inseq:
        side_by_side(lm, args)


def side_by_side(lm, args) -> None:
    """normviz and inseq on the same ids: the greedy continuation's text tokenised again (inseq takes texts), so
    both teacher-force exactly the same tokens; each timed against a forward pass in its own process."""
    import numpy as np
    import torch
    from bench_explain import encode_exactly

    from normviz.models.loading import SMOLLM2_CONVERTED, cache_dir
    from normviz.session.session import Session

    n, T = args.inseq_prompt or args.prompt, args.inseq_steps or args.steps
    enc = encode_exactly(lm, n)
    gen = Session.from_encoded(lm, [enc])[0].explain_continuation(T).generated_ids.tolist()
    ids = lm.tokenizer(lm.tokenizer.decode(enc.ids + gen), add_special_tokens=False)["input_ids"]
    if ids[:n] != enc.ids:
        print("inseq: the prompt does not survive a text round trip; skipped")
        return
    cont = ids[n:]
    full = torch.tensor([ids])

    def forward():
        with torch.no_grad():
            lm.head_model(input_ids=full, use_cache=False)

    forward()
    t0 = time.perf_counter()
    forward()
    f = time.perf_counter() - t0
    t0 = time.perf_counter()
    c = Session.from_encoded(lm, [enc])[0].explain_continuation(continuation=cont)
    ours = time.perf_counter() - t0
    gaps = [abs(np.nansum(c.sources[t]) + c.bias[t] - c.totals[t]) / abs(c.totals[t]) for t in range(len(c))]
    print(f"side by side: prompt {n} tokens, the same {len(cont)} teacher-forced steps")
    print(
        f"  normviz explain_continuation {ours:8.2f} s  {ours / f:7.1f} forward passes  completeness gap median "
        f"{np.median(gaps):.1e}, max {max(gaps):.1e}",
        flush=True,
    )
    job = {
        "model_dir": str(cache_dir() / SMOLLM2_CONVERTED),
        "prompt_ids": enc.ids,
        "continuation_ids": cont,
        "threads": torch.get_num_threads(),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(job, fh)
    r = subprocess.run([args.inseq, __file__, "--inseq-worker", fh.name], capture_output=True, text=True)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not line:
        print(f"inseq failed: {r.stderr[-3000:]}")
        return
    res = json.loads(line[-1])
    print(
        f"  inseq {res['inseq']} (torch {res['torch']}, its own process, forward {res['forward_s'] * 1e3:.0f} ms "
        f"there; text round trip {'exact' if res['roundtrip'] else 'NOT exact'}):"
    )
    for method in ("input_x_gradient", "integrated_gradients"):
        m = res[method]
        print(
            f"  {method:28s} {m['seconds']:8.2f} s  {m['ratio']:7.1f} forward passes  completeness gap "
            f"median {m['gap_median']:.2f}, max {m['gap_max']:.2f} ({m['steps']} steps)",
            flush=True,
        )


if __name__ == "__main__":
    main()

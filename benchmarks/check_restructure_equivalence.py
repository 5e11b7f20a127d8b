"""Every map key of the one-pipeline Session equals the pre-restructure code's (issue 18), in float64.

    python benchmarks/check_restructure_equivalence.py [--baseline /work/wt/baseline]

The baseline is a ``git worktree`` of main before the restructure (commit fd13ca3). Each side runs in its own
subprocess with its own PYTHONPATH (``--dump DIR``): the same tiny random float64 models
(:mod:`tools.tiny`, loaded as a file so that it builds them with either side's ``from_model``), every
key each side offers, default and opt-in (refused keys are compared as refused), written to one .npz per
case; then the arrays are compared: ≤ 1e-12 relative (max |Δ| / max |baseline| per key), the same keys, the
same tokens and notes.

Cases: bert, roberta, electra, distilbert, gpt2, llama, mistral, qwen2, qwen3 — one sequence (n = 9) and a
right-padded batch of two (n = 9 and 6, each compared); Marian, BART, T5 (and mBART, M2M100, gated T5) with a
given target.

``--skip REGEX`` (repeatable) leaves out keys changed on purpose after the restructure (matched against
``<case>/<key>``), e.g. round 3's ALTI pre-LN form and the Llama-family FF end point:
``--skip '(gpt2|llama|mistral|qwen2|qwen3|t5|t5_gated|mbart|m2m_100)_.*/(encoder_)?(rollout_)?alti$'
--skip '(llama|mistral|qwen.)_.*/(rollout_)?ff'``; keys and notes only the new side has are listed or ignored,
not counted as problems.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
TOL = 1e-12
SELF_ATTENTION = ("bert", "roberta", "electra", "distilbert", "gpt2", "llama", "mistral", "qwen2", "qwen3")
SEQ2SEQ = ("marian", "bart", "t5", "mbart", "m2m_100", "t5_gated")
OPT_IN = ["value_zeroing", "rollout_value_zeroing", "flow", "decompx"]
SRC = "the big cat sat on the red mat"
TGT = "le grand chat assis sur le tapis rouge"


def _tiny():
    spec = importlib.util.spec_from_file_location("normviz_tiny_models", HERE / "tools" / "tiny.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _save(out: Path, name: str, a, extra: dict) -> None:
    import numpy as np

    meta = {"keys": list(a.arrays), "refused": sorted(a.refused), "notes": a.notes, "tokens": list(a.tokens), **extra}
    np.savez(out / f"{name}.npz", __meta__=np.array(json.dumps(meta)), **a.arrays)


def dump(out: Path) -> None:
    import torch

    import normviz

    torch.set_num_threads(1)
    tiny = _tiny()
    out.mkdir(parents=True, exist_ok=True)
    for arch in SELF_ATTENTION:
        lm = tiny.build(arch)
        keys = ["all"] + OPT_IN
        one = normviz.Session.from_encoded(lm, [tiny.encoded(9)])[0].get(keys, strict=False)
        _save(out, f"{arch}_single", one, {})
        batch = normviz.Session.from_encoded(lm, [tiny.encoded(9), tiny.encoded(6, seed=2)])
        for b, s in enumerate(batch):
            _save(out, f"{arch}_batch{b}", s.get(keys, strict=False), {})
    for arch in SEQ2SEQ:
        lm = tiny.build_seq2seq(arch)
        s = normviz.Session(lm, SRC, target=TGT)
        a = s.get(["all"] + ["encoder_" + k for k in OPT_IN], strict=False)
        _save(
            out,
            f"{arch}_seq2seq",
            a,
            {
                "src": list(a.src_tokens),
                "tgt": list(a.tgt_tokens),
                "out": list(a.out_ids),
                "predicted": a.predicted_ids,
                "target": a.target_text,
            },
        )
    print(normviz.__file__, file=sys.stderr)


def compare(base: Path, new: Path, skip: list[str] = ()) -> int:
    import numpy as np

    bad, rows, worst, added = 0, 0, 0.0, set()

    def kept(case, k):
        return not any(re.search(p, f"{case}/{k}") for p in skip)

    for f in sorted(base.glob("*.npz")):
        a, b = np.load(f), np.load(new / f.name)
        ma, mb = json.loads(str(a["__meta__"])), json.loads(str(b["__meta__"]))
        added |= set(mb["keys"]) - set(ma["keys"])
        for meta in (ma, mb):  # compare what both sides have and the check keeps
            meta["keys"] = [k for k in meta["keys"] if k in ma["keys"] and kept(f.stem, k)]
            meta["refused"] = [k for k in meta["refused"] if kept(f.stem, k)]
            meta["notes"] = {
                k: v
                for k, v in meta["notes"].items()  # a note the baseline did not write is new, not a change
                if (k in meta["keys"] or k in ("pair", "target")) and k in ma["notes"]
            }
        if ma != mb:
            diff = {k: (ma.get(k), mb.get(k)) for k in set(ma) | set(mb) if ma.get(k) != mb.get(k)}
            print(f"{f.stem}: metadata differ: {diff}")
            bad += 1
        for k in ma["keys"]:
            if k not in b.files:
                continue
            x, y = a[k].astype(np.float64), b[k].astype(np.float64)
            rows += 1
            if x.shape != y.shape or a[k].dtype != b[k].dtype:
                print(f"{f.stem}/{k}: shape/dtype {a[k].shape} {a[k].dtype} vs {b[k].shape} {b[k].dtype}")
                bad += 1
                continue
            r = float(np.max(np.abs(x - y)) / max(np.max(np.abs(x)), 1e-300)) if x.size else 0.0
            worst = max(worst, r)
            if not r <= TOL:
                print(f"{f.stem}/{k}: relative difference {r:.3g} > {TOL:g}")
                bad += 1
    if added:
        print(f"keys only the new code has: {', '.join(sorted(added))}")
    print(
        f"{len(list(base.glob('*.npz')))} cases, {rows} arrays compared; worst relative difference {worst:.3g}; "
        f"{bad} problems" + (f" (skipped: {', '.join(skip)})" if skip else "")
    )
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", type=Path, help="(internal) compute every case with the normviz on sys.path")
    ap.add_argument("--baseline", type=Path, default=Path("/work/wt/baseline"))
    ap.add_argument("--skip", action="append", default=[], metavar="REGEX", help="keys changed on purpose")
    ap.add_argument("--dumps", type=Path, help="(internal) compare two earlier dumps DIR/baseline, DIR/new")
    args = ap.parse_args()
    if args.dump:
        dump(args.dump)
        return 0
    if args.dumps:
        return compare(args.dumps / "baseline", args.dumps / "new", args.skip)
    tmp = Path(tempfile.mkdtemp(prefix="normviz-equivalence-"))
    for side, root in (("baseline", args.baseline), ("new", HERE)):
        env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
        subprocess.run([sys.executable, __file__, "--dump", str(tmp / side)], env=env, cwd=str(tmp), check=True)
    return compare(tmp / "baseline", tmp / "new", args.skip)


if __name__ == "__main__":
    raise SystemExit(main())

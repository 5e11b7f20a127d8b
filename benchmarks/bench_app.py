"""Server-side latency of the Explore page, as a visitor uses it (Streamlit's AppTest runs the page script
in-process, exactly what the server does per interaction, without the browser's drawing).

    python benchmarks/bench_app.py [--model minilm] [--sentences 5] [--markdown]

For each model: the page is opened once (model load, not timed), then for each of ``--sentences`` new
sentences of ≤ 32 tokens: the time from typing the sentence to all default panels drawn; then, on that
sentence, a layer change, a head change and toggling a map that is already computed (off and on again).
Also counts the forward passes of the model per interaction (a pre-hook on the loaded model).
Medians are reported.

``--first-view``: instead, per model, the server's warm-up (:func:`normviz.ui.kit.warm.warm`, what ``normviz app
--warm MODEL`` runs before the first visitor) and then the first page load on that model, timed (issue 38: gemma3's
first view ≤ 5 s after ``--warm gemma3``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
SENTENCES = [
    "The old man walked slowly to the station in the rain.",
    "A quick brown fox jumps over the lazy dog near the river.",
    "She gave him the book that her teacher had recommended last year.",
    "Rain fell all night, and by morning the streets were rivers.",
    "The committee approved the budget after a long and heated debate.",
    "Birds sing loudly when the sun rises over the quiet hills.",
    "He could not remember where he had left his keys yesterday.",
    "Tomorrow the museum opens a new exhibition of modern paintings.",
]


def timed(at: AppTest, action) -> float:
    start = time.perf_counter()
    action(at)
    at.run()
    elapsed = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"the page raised: {at.exception[0].value}")
    return elapsed


def bench(model: str, n_sentences: int) -> dict:
    from normviz.ui.kit import st_parts

    at = AppTest.from_file(os.path.join(ROOT, "app.py"), default_timeout=600)
    at.query_params["model"] = model
    at.run()  # loads the model (first use) and analyses the default text
    if at.exception:
        raise RuntimeError(f"the page raised: {at.exception[0].value}")
    lm = st_parts.model_cache().get(model)
    passes = {"n": 0}
    handle = lm.model.register_forward_pre_hook(lambda *a, **k: passes.__setitem__("n", passes["n"] + 1))
    times = {"new sentence": [], "layer change": [], "head change": [], "map toggle": []}
    forwards = {k: 0 for k in times}
    maps = list(at.session_state["w_maps"])
    try:
        for i, text in enumerate(SENTENCES[:n_sentences]):
            steps = [
                ("new sentence", lambda a, t=text: a.text_input(key="w_text").input(t)),
                ("layer change", lambda a, i=i: a.slider(key="w_layer").set_value((i % (lm.n_layers - 1)) + 1)),
                ("head change", lambda a, i=i: a.selectbox(key="w_head").select(i % lm.n_heads)),
                ("map toggle", lambda a: a.session_state.__setitem__("w_maps", maps[:-1])),
                ("map toggle", lambda a: a.session_state.__setitem__("w_maps", maps)),
            ]
            for name, action in steps:
                before = passes["n"]
                times[name].append(timed(at, action))
                forwards[name] += passes["n"] - before
    finally:
        handle.remove()
    n_tokens = [len(lm.tokenizer(t)["input_ids"]) for t in SENTENCES[:n_sentences]]
    return {
        "model": model,
        "maps": maps,
        "tokens": (min(n_tokens), max(n_tokens)),
        "median": {k: statistics.median(v) for k, v in times.items()},
        "max": {k: max(v) for k, v in times.items()},
        "forwards": forwards,
        "runs": {k: len(v) for k, v in times.items()},
    }


def first_view(model: str) -> dict:
    """The warm-up's seconds, then the first visitor's page load (the default text and panels) on ``model``."""
    from normviz.ui.kit.warm import warm

    warmed = warm(model)
    at = AppTest.from_file(os.path.join(ROOT, "app.py"), default_timeout=600)
    at.query_params["model"] = model
    start = time.perf_counter()
    at.run()
    elapsed = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"the page raised: {at.exception[0].value}")
    return {"model": model, "warm": warmed, "first_view_s": round(elapsed, 2), "load_average": os.getloadavg()[0]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", nargs="*", default=["minilm", "smollm2"])
    p.add_argument("--sentences", type=int, default=5)
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--first-view", action="store_true")
    args = p.parse_args(argv)
    if args.first_view:
        for m in args.model:
            print(first_view(m), flush=True)
        return 0
    results = [bench(m, args.sentences) for m in args.model]
    if args.markdown:
        print(
            "| model | default panels | tokens | new sentence | layer change | head change | map toggle | forward "
            "passes |"
        )
        print("|---|---|---|---:|---:|---:|---:|---|")
        for r in results:
            med = r["median"]
            fw = ", ".join(f"{k}: {v}/{r['runs'][k]}" for k, v in r["forwards"].items())
            print(
                f"| {r['model']} | {', '.join(r['maps'])} | {r['tokens'][0]}–{r['tokens'][1]} | "
                f"{med['new sentence']:.2f} s | {med['layer change']:.2f} s | {med['head change']:.2f} s | "
                f"{med['map toggle']:.2f} s | {fw} |"
            )
    else:
        for r in results:
            print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())

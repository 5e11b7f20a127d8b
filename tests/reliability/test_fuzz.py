"""Item 7: property-based fuzzing (hypothesis) — CLI arguments and every page's query parameters give a message,
never a traceback; 8 concurrent sessions give the results of independent analyses; RSS stays bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import normviz
from normviz.ui.kit.safe import lit, plain
from normviz.ui.kit.state import ViewState

from ..helpers.cli import run as run_cli
from .helpers import MARKER, PAGES, PAYLOADS, ROOT, app, markup_hits, tracebacks

NASTY = st.sampled_from(
    PAYLOADS
    + [
        "",
        " ",
        "-1",
        "999",
        "1e9",
        "nan",
        "all",
        "norm,norm",
        "\x00",
        "🙂" * 50,
        "a" * 5000,
        "../../etc/passwd",
        "/",
        "minilm",
        "ff_res_ln,ff_res_ln",
    ]
)
VALUE = st.one_of(NASTY, st.text(max_size=40))
FIELDS = [f for f in ViewState.__dataclass_fields__ if f != "problems"] + ["zzz"]
FAST = settings(
    max_examples=int(os.environ.get("NORMVIZ_FUZZ_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)


@FAST
@given(st.text(max_size=300))
def test_plain_and_lit_never_make_links(s):
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")
    for shown in (plain(s + f" http://{MARKER} [x](http://{MARKER})"), lit(s + f"](http://{MARKER})")):
        tokens = [t for blk in md.parse(shown) for t in [blk] + list(blk.children or [])]
        assert not [t for t in tokens if t.type in ("link_open", "image", "html_inline", "html_block")]


@FAST
@given(st.dictionaries(st.sampled_from(FIELDS), VALUE, max_size=4))
def test_view_from_any_query_never_raises(query):
    view = ViewState.from_query(query, max_text_chars=6400)
    assert len(view.text) <= 6400 and len(set(view.maps)) == len(view.maps)


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("NORMVIZ_ALLOWED_MODELS", "NORMVIZ_MAX_TOKENS", "NORMVIZ_PUBLIC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NORMVIZ_MAX_TOKENS", "32")  # keeps every fuzzed analysis short


@pytest.mark.parametrize("page", PAGES)
def test_pages_with_fuzzed_query_show_messages_not_tracebacks(page):
    @settings(
        max_examples=int(os.environ.get("NORMVIZ_FUZZ_PAGE_EXAMPLES", "5")),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(st.dictionaries(st.sampled_from(FIELDS), VALUE, max_size=4))
    def one(query):
        at = app(page, query)
        at.run()
        assert not tracebacks(at), (query, tracebacks(at))
        assert not markup_hits(at), (query, markup_hits(at))

    one()


ARG = st.one_of(NASTY, st.text(max_size=20), st.integers(-10, 10).map(str))
FLAGS = [
    "--model",
    "--text",
    "--text-pair",
    "--out",
    "--maps",
    "--dtype",
    "--device",
    "--max-tokens",
    "--option",
    "--input",
    "--stats",
    "--batch-size",
    "--chunk-size",
    "--limit",
    "--format",
    "--engine",
    "--workers",
]


@FAST
@given(
    st.sampled_from(["export", "corpus", "nope", "--help-me"]),
    st.lists(st.tuples(st.sampled_from(FLAGS), ARG), max_size=6),
)
def test_cli_with_fuzzed_arguments_gives_a_message(tmp_path_factory, command, pairs):
    tmp = tmp_path_factory.mktemp("cli")
    argv = [command] + [x.replace("{tmp}", str(tmp)) for f, v in pairs for x in (f, v)]
    loaded = []
    real = normviz.load

    def load(*a, **k):  # an argument list that passes every check may load the model: count, then stop
        loaded.append(a)
        raise normviz.core.errors.NormvizError("stop here (fuzz)")

    normviz.load = normviz.models.load = load  # the CLI's export loads through the first, corpus/align the second
    import io
    from contextlib import redirect_stderr, redirect_stdout

    err = io.StringIO()
    try:
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            rc = run_cli(argv)
    finally:
        normviz.load = normviz.models.load = real
    text = err.getvalue()
    assert "Traceback" not in text, (argv, text)
    assert rc in (0, 2), (argv, rc, text)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, text)


# --- concurrency and memory ----------------------------------------------------------------------------------

TEXTS = [f"Sentence {i}: the quick brown fox number {i} jumps over {i % 3} lazy dogs." for i in range(8)]
KEYS = ["attention", "norm", "attn_res_ln"]


def test_eight_concurrent_sessions_match_independent_analyses():
    lm = normviz.load("minilm")
    alone = [normviz.Session(lm, t).get(KEYS) for t in TEXTS]
    out: dict[int, object] = {}
    barrier = threading.Barrier(len(TEXTS))

    def go(i):
        barrier.wait()
        out[i] = normviz.Session(lm, TEXTS[i]).get(KEYS)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(TEXTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    worst = max(float(np.abs(out[i][k] - alone[i][k]).max()) for i in range(len(TEXTS)) for k in KEYS)
    print(f"8 concurrent sessions: max |difference| {worst:.2e}")
    assert worst < 1e-5


RSS_PROBE = r"""
import gc, json, sys, psutil, normviz
from normviz.ui.kit.memory import bound_heap
bound_heap()  # as the app's server process does (normviz.ui.kit.st_parts)
lm = normviz.load("minilm")
proc = psutil.Process()
n = int(sys.argv[1])
rss = []
for i in range(n):
    text = " ".join(f"w{(i * 7 + j) % 97}" for j in range(5 + i % 40))
    normviz.Session(lm, text, max_tokens=128).get(["attention", "norm", "attn_res_ln", "ff_res_ln"])
    gc.collect()
    rss.append(proc.memory_info().rss / 2**20)
print(json.dumps({"first10_mb": max(rss[:10]), "last10_mb": max(rss[-10:]), "max_mb": max(rss), "n": n}))
"""


def _rss(n: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, str(n)], capture_output=True, text=True, env=env, timeout=1200
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_rss_over_100_analyses_stays_bounded():
    r = _rss(100)
    print(r)
    assert r["last10_mb"] - r["first10_mb"] < 100 and r["max_mb"] < 1500

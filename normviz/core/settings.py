"""Every setting of normviz, declared once: the ``NORMVIZ_*`` environment variables and the ``options`` of the
map families (``--option KEY=VALUE`` on the command line, ``options=`` in Python), each with its type, default,
range and meaning.

This is the one module that reads ``NORMVIZ_*`` from the environment (``tests/unit/test_settings.py`` greps for
it). Two ways a value is checked:

- an environment variable (:func:`env`) that is malformed falls back to its default with a message naming the
  variable, the value and the fallback (``problems``): the operator of an app sees it on stderr and in the page;
- an option (:func:`parse_options` for ``KEY=VALUE`` strings, :func:`check_options` for a dict) that is unknown
  or ill-typed is refused on one line (:class:`normviz.core.errors.NormvizError`; the CLI exits with 2).

A family that registers a time budget declares its option ``<family>_budget_s`` here
(:func:`declare_budget`, from :mod:`normviz.methods.registry`). ``scripts/settings_table.py`` writes the
table of ``docs/settings.md`` from :data:`ENV` and :data:`OPTIONS`.
"""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass
from typing import Any, Mapping


def _error(message: str) -> Exception:
    from .errors import NormvizError  # here, not at the top: app.py loads this file alone before torch (see there)

    return NormvizError(message)


YES = ("1", "true", "yes", "on")
NO = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Setting:
    """One setting. ``kind``: flag (yes/no), int, float, str, choice (one of ``choices``), list (comma-separated),
    path. ``lo``/``hi``: the closed range of a number. ``scope``: who reads it (app, server, library, cli,
    scripts, tests) — the docs group by it."""

    name: str
    kind: str
    default: Any
    doc: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    scope: str = "library"
    shown_default: str | None = None  # the default as the docs say it, when the value is computed elsewhere

    @property
    def range(self) -> str:
        if self.kind == "choice":
            return " | ".join(self.choices)
        if self.kind == "flag":
            return "1 | 0 (true/false, yes/no, on/off)"
        if self.lo is None and self.hi is None:
            return ""
        lo = "" if self.lo is None else _num(self.lo)
        hi = "" if self.hi is None else _num(self.hi)
        return f"{lo} … {hi}".strip()

    @property
    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if self.kind == "flag":
            return "1" if self.default else "0"
        return (
            ""
            if self.default is None
            else _num(self.default)
            if isinstance(self.default, (int, float))
            else str(self.default)
        )


def _num(x) -> str:
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    return f"{x:,}".replace(",", "\u2009") if isinstance(x, int) and abs(x) >= 10_000 else str(x)


def _env(name, kind, default, doc, lo=None, hi=None, choices=(), scope="app", shown=None) -> Setting:
    return Setting(name, kind, default, doc, lo, hi, tuple(choices), scope, shown)


# ---- environment variables
ENV: dict[str, Setting] = {
    s.name: s
    for s in (
        _env(
            "NORMVIZ_PUBLIC",
            "flag",
            False,
            "public demo: no error details, no server paths, embedded models only by "
            "default; one thread per pass (OMP/MKL/NUMBA_NUM_THREADS default to 1)",
        ),
        _env(
            "NORMVIZ_ALLOWED_MODELS",
            "list",
            None,
            "comma-separated models the model field accepts",
            shown="any (public: minilm,smollm2,toy-mt)",
        ),
        _env(
            "NORMVIZ_MAX_TOKENS",
            "int",
            128,
            "analysed length cap (texts are cut to 50 characters per token before tokenising)",
            4,
            4096,
        ),
        _env(
            "NORMVIZ_FF_BUDGET",
            "float",
            60.0,
            "seconds the feed-forward maps may take (estimated before running)",
            0.1,
            86400.0,
        ),
        _env(
            "NORMVIZ_COST_BUDGET",
            "float",
            60.0,
            "seconds value zeroing, ALTI, effective attention, GlobEnc, DecompX, "
            "explain and routes may take (estimated before running)",
            0.1,
            86400.0,
        ),
        _env(
            "NORMVIZ_MEMORY_BUDGET_MB",
            "float",
            2048.0,
            "MB a visitor's whole [L, …] map arrays may hold (refused "
            "before computing; one layer at a time still works)",
            64.0,
            1048576.0,
        ),
        _env(
            "NORMVIZ_SERVER_MEMORY_MB",
            "float",
            6144.0,
            "MB the whole server may hold, its worker processes "
            "included (every visitor together: least recently used texts dropped, then requests refused with a "
            "message; at most 3/4 of the "
            "machine)",
            256.0,
            1048576.0,
        ),
        _env(
            "NORMVIZ_HEAVY_WORKERS",
            "int",
            1,
            "worker processes for the costly maps (normviz.workers.process); 0: in the server",
            0,
            4,
        ),
        _env("NORMVIZ_CORPUS_MAX_LINES", "int", 200, "lines the Corpus page analyses at most", 1, 100_000),
        _env(
            "NORMVIZ_MAX_UPLOAD_MB",
            "float",
            5.0,
            "largest file the Corpus page accepts, in MB (also cap it with server.maxUploadSize)",
            0.001,
            200.0,
        ),
        _env(
            "NORMVIZ_INSTANT_CELLS",
            "int",
            250_000,
            "map cells sent to the browser for instant layer/head changes (0: every change reruns)",
            0,
            10**9,
        ),
        _env(
            "NORMVIZ_ONE_RUN",
            "flag",
            False,
            "one script run per session at a time (a newer run waits for the older to stop)",
        ),
        _env(
            "NORMVIZ_TIMING",
            "flag",
            False,
            "one line per run on the server's stderr (normviz-timing …) for tests and benchmarks",
        ),
        _env(
            "NORMVIZ_WARM",
            "str",
            "",
            "warm up before the first visitor: 1 (the default model) or a comma-separated "
            "list of models (normviz app --warm)",
            shown="0",
        ),
        _env(
            "NORMVIZ_CACHE",
            "path",
            None,
            "directory for converted models (smollm2's GGUF conversion)",
            scope="library",
            shown="~/.cache/normviz",
        ),
        _env(
            "NORMVIZ_POOL_MB",
            "float",
            512.0,
            "MB of idle tensors the buffer pool keeps (0 turns it off)",
            0.0,
            1048576.0,
            scope="library",
        ),
        _env("NORMVIZ_DEBUG", "flag", False, "the CLI prints the traceback of an unexpected error", scope="cli"),
        _env(
            "NORMVIZ_WORKER_MODELS",
            "int",
            2,
            "models a heavy-maps worker process keeps loaded (set by the server)",
            1,
            64,
            scope="server",
        ),
        _env(
            "NORMVIZ_WORKER_NICE",
            "int",
            10,
            "niceness of a heavy-maps worker process (set by the server)",
            0,
            19,
            scope="server",
        ),
        _env(
            "NORMVIZ_WORKER_SESSIONS",
            "int",
            3,
            "texts a heavy-maps worker keeps recorded for a long text's layer jobs",
            1,
            64,
            scope="server",
        ),
        _env(
            "NORMVIZ_WORKER_IDLE_S",
            "float",
            90.0,
            "seconds a worker's kept session may stay unused before it is "
            "dropped; a worker process without a job for as long is ended (the next job starts another)",
            0.0,
            86400.0,
            scope="server",
        ),
        _env(
            "NORMVIZ_SERVE_DIR",
            "path",
            None,
            "where scripts/serve_many.sh (normviz app --procs N) writes configs, pids and logs",
            scope="scripts",
            shown="a temporary directory",
        ),
        _env(
            "NORMVIZ_HEALTH_EVERY_S",
            "int",
            5,
            "scripts/serve_many.sh asks each app process's /_stcore/health this often (seconds)",
            1,
            3600,
            scope="scripts",
        ),
        _env(
            "NORMVIZ_HEALTH_TIMEOUT_S",
            "int",
            20,
            "scripts/serve_many.sh kills (and so restarts) an app process that "
            "answered once and then not for this long (seconds)",
            2,
            86400,
            scope="scripts",
        ),
        _env(
            "NORMVIZ_SETUP_BROWSER",
            "flag",
            False,
            "scripts/setup.sh installs Debian's chromium for the browser tests (scripts/test.sh sets it)",
            scope="scripts",
        ),
        _env(
            "NORMVIZ_SETUP_SMOLLM2",
            "flag",
            True,
            "scripts/setup.sh converts the embedded SmolLM2 from its GGUF file "
            "into NORMVIZ_CACHE once (0: at its first load instead)",
            scope="scripts",
        ),
        _env(
            "NORMVIZ_SETUP_GEMMA3",
            "flag",
            True,
            "scripts/setup.sh converts the embedded Gemma-3-270M from its GGUF "
            "file into NORMVIZ_CACHE once, beside SmolLM2's (0: at its first load instead, minutes)",
            scope="scripts",
        ),
        _env(
            "NORMVIZ_CHROMIUM",
            "path",
            None,
            "the Chromium binary of the browser tests",
            scope="tests",
            shown="/usr/bin/chromium",
        ),
        _env(
            "NORMVIZ_CHROMEDRIVER",
            "path",
            None,
            "the ChromeDriver of the browser tests",
            scope="tests",
            shown="/usr/bin/chromedriver",
        ),
        _env(
            "NORMVIZ_SCREENSHOTS",
            "path",
            None,
            "where the browser tests keep their screenshots",
            scope="tests",
            shown="a temporary directory",
        ),
        _env("NORMVIZ_LATENCY_ROUNDS", "int", 4, "rounds of the browser test's redraw timing", 1, 1000, scope="tests"),
        _env(
            "NORMVIZ_REDRAW_BOUND_X",
            "float",
            10.0,
            "the browser test's redraw bound, × the quiet floor",
            1.0,
            1000.0,
            scope="tests",
        ),
        _env(
            "NORMVIZ_TEST_PID_FILE",
            "path",
            None,
            "where the server-stop test's stand-in app writes its heavy-maps worker's pid",
            scope="tests",
            shown="set by the test",
        ),
        _env(
            "NORMVIZ_CONT_DRAW_S",
            "float",
            None,
            "the continuation browser test's bar (seconds from the click to the "
            "painted heatmap); unset, the figure is reported, not asserted",
            0.1,
            3600.0,
            scope="tests",
            shown="unset (issue 39's bar is 3 s)",
        ),
        _env(
            "NORMVIZ_LONG_RESULTS",
            "path",
            None,
            "where the long-document browser test writes its timings",
            scope="tests",
            shown="benchmarks/results/long_browser.json",
        ),
        _env("NORMVIZ_FUZZ_EXAMPLES", "int", 12, "examples per property of the fuzz tests", 1, 10**6, scope="tests"),
        _env(
            "NORMVIZ_FUZZ_PAGE_EXAMPLES", "int", 5, "examples per page of the page fuzz test", 1, 10**6, scope="tests"
        ),
    )
}


def _opt(name, kind, default, doc, lo=None, hi=None, choices=(), shown=None) -> Setting:
    return Setting(name, kind, default, doc, lo, hi, tuple(choices), "option", shown)


# ---- options of the families and the Session (defaults: None = the module's own, said in ``shown``)
OPTIONS: dict[str, Setting] = {
    s.name: s
    for s in (
        _opt(
            "rollout_normalization",
            "choice",
            "standard",
            "how rollouts and flows are normalised (receptive_field: "
            "divided by a uniform baseline's, for causal models)",
            choices=("standard", "receptive_field"),
        ),
        _opt(
            "flow_solver",
            "choice",
            "auto",
            "max-flow solver of attention flow (auto: igraph when installed)",
            choices=("auto", "igraph", "scipy"),
        ),
        _opt("flow_max_tokens", "int", 96, "longest input attention flow runs on", 1, 1_000_000),
        _opt("flow_max_work", "float", 2e8, "largest max-flow work (layers × n³) attention flow runs", 0.0, 1e18),
        _opt(
            "effective_rtol",
            "float",
            None,
            "relative tolerance of effective attention's null space",
            0.0,
            1.0,
            shown="numpy's",
        ),
        _opt(
            "effective_causal",
            "choice",
            "prefix",
            "effective attention of a causal model: over each row's prefix or the full matrix",
            choices=("prefix", "full"),
        ),
        _opt("effective_value_bias", "flag", True, "effective attention keeps the value bias"),
        _opt(
            "stop_early",
            "flag",
            True,
            "a get() of attention-only families stops the recording pass after the last "
            "attention block (0: always one full pass)",
        ),
        _opt("compute_together", "flag", True, "families computed together share one pass (0: one by one)"),
        _opt(
            "record_attention",
            "choice",
            "auto",
            "record the attention weights or q, k",
            choices=("auto", "qk", "weights"),
        ),
        _opt("map_cache_mb", "float", 512.0, "MB of per-layer maps a Session keeps", 0.0, 1048576.0),
        _opt(
            "long_map_cache_mb",
            "float",
            256.0,
            "MB a long input's layer (α streamed) is put into at most",
            0.0,
            1048576.0,
        ),
        _opt(
            "memory_budget_mb",
            "float",
            None,
            "MB the whole [L, …] arrays of one get() may hold (refused before computing)",
            0.0,
            1048576.0,
            shown="half this machine's memory",
        ),
        _opt(
            "chunk_bytes",
            "int",
            None,
            "bytes per row chunk of per-pair vectors",
            1,
            1 << 40,
            shown="each path's own (32–64 MiB)",
        ),
        _opt("value_zeroing_chunk_bytes", "int", 256 * 2**20, "bytes per chunk of value zeroing's reruns", 1, 1 << 40),
        _opt("explain_max_bytes", "int", 2 * 2**30, "bytes the propagated parts of explain may hold", 1, 1 << 44),
        _opt(
            "cost_flops_per_second",
            "float",
            None,
            "the rate the cost checks assume",
            1.0,
            1e18,
            shown="the device's measured rate",
        ),
        _opt(
            "ff_flops_per_second",
            "float",
            None,
            "the rate the feed-forward cost check assumes",
            1.0,
            1e18,
            shown="the device's measured rate",
        ),
        _opt(
            "explain_cache_bytes",
            "int",
            256 * 2**20,
            "bytes of FF factors kept per text for the next candidate's backward pass",
            0,
            1 << 44,
        ),
        _opt("intervention_batch_tokens", "int", 4096, "tokens per batched pass of knockout / head ablation", 1, 10**8),
        _opt(
            "routes_deadline_s",
            "float",
            None,
            "seconds after which a routes call stops itself",
            0.0,
            1e9,
            shown="4 × routes_budget_s, else 600",
        ),
        _opt(
            "routes_numbers_per_second",
            "float",
            None,
            "the rate the routes' cost check assumes (parts scored per second)",
            1.0,
            1e18,
            shown="the device's measured rate",
        ),
        _opt(
            "max_new_tokens",
            "int",
            None,
            "encoder–decoders: longest generated target",
            1,
            100_000,
            shown="from the source's length",
        ),
    )
}

BUDGET_DOC = "seconds {family} may take (estimated before it runs; absent: no limit)"


def declare_budget(family: str, alias: str | None = None) -> Setting:
    """The option ``<family>_budget_s`` (seconds, > 0 and finite; absent: no limit), declared once; ``alias``: an
    older name of it, declared as such."""
    name = alias or f"{family}_budget_s"
    if name not in OPTIONS:
        doc = f"older name of {family}_budget_s" if alias else BUDGET_DOC.format(family=family)
        OPTIONS[name] = _opt(name, "float", None, doc, 0.0, 1e9, shown="no limit")
    return OPTIONS[name]


for _family in ("explain", "routes", "sinks"):  # the attribution's budgets (the families' come from their registration)
    declare_budget(_family)


# ---- parsing
def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= 60 else raw[:60] + "…")


def _typed(s: Setting, raw: Any) -> Any:
    """``raw`` (a string or a value) as ``s``'s type, or ValueError saying why (without the name)."""
    if s.kind == "flag":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, (int, float)) and raw in (0, 1):
            return bool(raw)
        text = str(raw).strip().lower()
        if text in YES:
            return True
        if text in NO:
            return False
        raise ValueError("is not a yes/no value; use 1 or 0 (true/false)")
    if s.kind in ("int", "float"):
        if isinstance(raw, bool):
            raise ValueError(f"is not a {'whole ' if s.kind == 'int' else ''}number")
        try:
            value = raw if isinstance(raw, (int, float)) else float(str(raw).strip())
        except (TypeError, ValueError):
            raise ValueError(f"is not a {'whole ' if s.kind == 'int' else ''}number") from None
        if s.kind == "int":
            if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
                raise ValueError("is not a whole number")
            value = (
                int(value) if not isinstance(raw, str) or not raw.strip().lstrip("+-").isdigit() else int(raw.strip())
            )
        else:
            value = float(value)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("is not a finite number")
        if (s.lo is not None and value < s.lo) or (s.hi is not None and value > s.hi):
            raise ValueError(f"is outside {s.range}")
        return value
    if s.kind == "choice":
        text = str(raw).strip().lower().replace("-", "_")
        if text not in s.choices:
            raise ValueError(f"is not known; use one of {', '.join(s.choices)}")
        return text
    if s.kind == "list":
        if isinstance(raw, (list, tuple)):
            return tuple(str(x).strip() for x in raw if str(x).strip())
        return tuple(dict.fromkeys(m.strip() for m in str(raw).split(",") if m.strip()))
    return str(raw)


def env(name: str, environ: Mapping[str, str] | None = None, problems: list[str] | None = None) -> Any:
    """The typed value of the environment variable ``name`` (declared in :data:`ENV`), or its default when unset,
    empty or malformed (then a line saying so is appended to ``problems``). A number outside its range is
    clamped to it (a non-positive one below a positive range falls back to the default)."""
    s = ENV[name]
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None or not str(raw).strip():
        return s.default
    try:
        return _typed(s, raw)
    except ValueError as exc:
        fallback = s.default
        if s.kind in ("int", "float") and "outside" in str(exc):
            value = (int if s.kind == "int" else float)(str(raw).strip())
            if not (value < s.lo and s.lo > 0 and value <= 0):
                fallback = min(max(value, s.lo), s.hi)
        if problems is not None:
            shown_fallback = {True: "1", False: "0"}.get(fallback, fallback) if s.kind == "flag" else fallback
            problems.append(f"{name}={_shown(str(raw))} {exc}; using {shown_fallback}.")
        return fallback


def flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """A yes/no environment variable (1/true/yes/on); malformed: its default."""
    return bool(env(name, environ))


def env_raw(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The unparsed value of a declared variable (None when unset), for the few that are passed on verbatim."""
    ENV[name]  # declared
    return (os.environ if environ is None else environ).get(name)


def _unknown(name: str, where: str) -> Exception:
    close = difflib.get_close_matches(name, list(OPTIONS), n=3)
    hint = f" Did you mean {' or '.join(close)}?" if close else " See docs/settings.md for the options."
    return _error(f"{where} {name!r} is not an option of normviz.{hint}")


def option(name: str, value: Any, where: str = "option") -> Any:
    """``value`` checked and typed as the option ``name``; NormvizError (one line) when unknown or ill-typed."""
    s = OPTIONS.get(name)
    if s is None:
        raise _unknown(name, where)
    try:
        return _typed(s, value)
    except ValueError as exc:
        shown = _shown(value) if isinstance(value, str) else repr(value)
        raise _error(f"{where} {name}={shown} {exc}.") from None


def check_options(options: Mapping[str, Any] | None) -> dict:
    """A copy of ``options`` with every value typed; NormvizError for an unknown name or an ill-typed value.
    ``None`` values are kept (they mean the default)."""
    out = {}
    for name, value in (options or {}).items():
        out[name] = None if value is None else option(str(name), value)
    return out


def parse_options(items: list[str]) -> dict:
    """``--option KEY=VALUE`` strings as a typed dict (:func:`option`); one-line NormvizError otherwise."""
    out = {}
    for item in items:
        if "=" not in item:
            raise _error(f"--option expects KEY=VALUE, got {_shown(item)}.")
        k, v = item.split("=", 1)
        out[k.strip()] = option(k.strip(), v, where="--option")
    return out


def get(options: Mapping[str, Any] | None, name: str) -> Any:
    """Option ``name`` from ``options`` (typed), or its declared default."""
    value = (options or {}).get(name)
    return OPTIONS[name].default if value is None else option(name, value)


__all__ = [
    "ENV",
    "OPTIONS",
    "Setting",
    "check_options",
    "declare_budget",
    "env",
    "env_raw",
    "flag",
    "get",
    "option",
    "parse_options",
]

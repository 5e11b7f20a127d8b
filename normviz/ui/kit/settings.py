"""Every ``NORMVIZ_*`` setting of the app, validated once: a bad value falls back, with a message that names the
variable, the value and the fallback (shown to the operator on stderr and as a note in the page).

| variable | meaning | default |
|---|---|---|
| NORMVIZ_PUBLIC | 1: public demo (no error details, no server paths, embedded models only by default; one thread per pass: OMP/MKL/NUMBA_NUM_THREADS default to 1) | 0 |
| NORMVIZ_ALLOWED_MODELS | comma-separated models the model field accepts | any (public: minilm,smollm2) |
| NORMVIZ_MAX_TOKENS | analysed length cap, 4 … 4096 | 128 |
| NORMVIZ_FF_BUDGET | seconds the feed-forward maps may take (estimated before running) | 60 |
| NORMVIZ_COST_BUDGET | seconds value zeroing, ALTI, effective attention, GlobEnc, DecompX may take (estimated) | 60 |
| NORMVIZ_MEMORY_BUDGET_MB | MB a visitor's whole [L, …] map arrays may hold (refused before computing; one layer at a time still works), 64 … 1048576 | 2048 |
| NORMVIZ_SERVER_MEMORY_MB | MB the whole server process may hold (every visitor together: least recently used texts dropped, then requests refused with a message; at most 3/4 of the machine), 256 … 1048576 | 6144 |
| NORMVIZ_HEAVY_WORKERS | worker processes for the costly maps (normviz.workers), 0 … 4; 0: in the server | 1 |
| NORMVIZ_CORPUS_MAX_LINES | lines the Corpus page analyses at most, 1 … 100000 | 200 |
| NORMVIZ_MAX_UPLOAD_MB | largest file the Corpus page accepts, in MB (also cap it with server.maxUploadSize) | 5 |
| NORMVIZ_CACHE | directory for converted models | ~/.cache/normviz |
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Mapping

from .safe import public as _public

EMBEDDED_MODELS = ("minilm", "smollm2", "toy-mt")
EMBEDDED_SEQ2SEQ = ("toy-mt",)  # embedded encoder–decoders: the Translate page's, not offered on the other pages
DEFAULT_TOKEN_CAP = 128
KNOWN = ("NORMVIZ_PUBLIC", "NORMVIZ_ALLOWED_MODELS", "NORMVIZ_MAX_TOKENS", "NORMVIZ_FF_BUDGET", "NORMVIZ_COST_BUDGET",
         "NORMVIZ_CORPUS_MAX_LINES", "NORMVIZ_MAX_UPLOAD_MB", "NORMVIZ_CACHE", "NORMVIZ_HEAVY_WORKERS",
         "NORMVIZ_MEMORY_BUDGET_MB", "NORMVIZ_SERVER_MEMORY_MB")


@dataclass(frozen=True)
class Settings:
    public: bool = False
    allowed_models: tuple[str, ...] | None = None
    max_tokens: int = DEFAULT_TOKEN_CAP
    ff_budget_s: float = 60.0
    cost_budget_s: float = 60.0
    corpus_max_lines: int = 200
    max_upload_mb: float = 5.0
    heavy_workers: int = 1
    memory_budget_mb: float = 2048.0
    server_memory_mb: float = 6144.0
    problems: tuple[str, ...] = field(default=(), compare=False)

    @property
    def max_text_chars(self) -> int:
        """Longest text the pages accept before tokenising (50 characters per token of the cap)."""
        return self.max_tokens * 50


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= 60 else raw[:60] + "…")


def _number(env, name, default, lo, hi, kind, problems):
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = kind(raw.strip())
    except ValueError:
        problems.append(f"{name}={_shown(raw)} is not a {'whole ' if kind is int else ''}number; using {default}.")
        return default
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(f"{name}={_shown(raw)} is not a finite number; using {default}.")
        return default
    if value < lo or value > hi:
        fallback = default if value < lo and lo > 0 and value <= 0 else min(max(value, lo), hi)
        problems.append(f"{name}={_shown(raw)} is outside {lo} … {hi}; using {fallback}.")
        return fallback
    return value


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    problems: list[str] = []
    raw_public = env.get("NORMVIZ_PUBLIC", "")
    if raw_public.strip().lower() not in ("", "0", "1", "true", "false", "yes", "no", "on", "off"):
        problems.append(f"NORMVIZ_PUBLIC={_shown(raw_public)} is not 1 or 0; using 0 (not public).")
    public = _public(env)
    allowed: tuple[str, ...] | None = None
    raw = env.get("NORMVIZ_ALLOWED_MODELS")
    if raw is not None and raw.strip():
        names = tuple(dict.fromkeys(m.strip() for m in raw.split(",") if m.strip()))
        if names:
            allowed = names
        else:
            allowed = EMBEDDED_MODELS
            problems.append(f"NORMVIZ_ALLOWED_MODELS={_shown(raw)} names no model; using {', '.join(EMBEDDED_MODELS)}.")
    elif public:
        allowed = EMBEDDED_MODELS
    max_tokens = _number(env, "NORMVIZ_MAX_TOKENS", DEFAULT_TOKEN_CAP, 4, 4096, int, problems)
    ff = _number(env, "NORMVIZ_FF_BUDGET", 60.0, 0.1, 86400.0, float, problems)
    cost = _number(env, "NORMVIZ_COST_BUDGET", 60.0, 0.1, 86400.0, float, problems)
    lines = _number(env, "NORMVIZ_CORPUS_MAX_LINES", 200, 1, 100_000, int, problems)
    upload = _number(env, "NORMVIZ_MAX_UPLOAD_MB", 5.0, 0.001, 200.0, float, problems)
    heavy = _number(env, "NORMVIZ_HEAVY_WORKERS", 1, 0, 4, int, problems)
    memory_mb = _number(env, "NORMVIZ_MEMORY_BUDGET_MB", 2048.0, 64.0, 1048576.0, float, problems)
    server_mb = _number(env, "NORMVIZ_SERVER_MEMORY_MB", 6144.0, 256.0, 1048576.0, float, problems)
    cache = env.get("NORMVIZ_CACHE")
    if cache is not None and cache.strip() and os.path.exists(cache) and not os.path.isdir(cache):
        problems.append(f"NORMVIZ_CACHE={_shown(cache)} is a file, not a directory; converted models will not be "
                        "cached there (loading smollm2 fails until it names a directory).")
    return Settings(public=public, allowed_models=allowed, max_tokens=max_tokens, ff_budget_s=ff, cost_budget_s=cost,
                    corpus_max_lines=lines, max_upload_mb=upload, heavy_workers=heavy, memory_budget_mb=memory_mb,
                    server_memory_mb=server_mb,
                    problems=tuple(problems))


_CACHE: dict[tuple, Settings] = {}


def settings(env: Mapping[str, str] | None = None) -> Settings:
    """The validated settings; computed once per distinct environment (problems printed to stderr once)."""
    env = os.environ if env is None else env
    key = tuple((k, env.get(k)) for k in KNOWN)
    if key not in _CACHE:
        s = load_settings(env)
        for p in s.problems:
            print(f"normviz: setting ignored: {p}", file=__import__("sys").stderr)
        _CACHE[key] = s
    return _CACHE[key]

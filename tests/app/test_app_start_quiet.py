"""The app's start is quiet of library noise (issue 42 item 10): a warmed server (``python -m normviz.ui.kit.warm
app.py``, what ``normviz app --warm`` runs) printed "to view this Streamlit app on a browser, run it with …
streamlit run …/warm.py", ~20 "missing ScriptRunContext" lines, "An update to the [server] config option section
was detected" and transformers' weight-loading bar, because each Streamlit logger carries its own level and
handler (a level set on "streamlit" reached none of its children). The server is started for real, until it
listens; its console must hold our own line ("normviz: warmed up minilm") and none of those."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time

from normviz.ui.kit import warm

from ..helpers.app import ROOT

NOISY = (
    "missing ScriptRunContext",
    "to view this Streamlit app on a browser",
    "streamlit run ",
    "config option section was detected",
    "Loading weights",
    "Token indices sequence length",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_warmed_servers_start_prints_our_lines_and_no_library_noise(tmp_path):
    log = tmp_path / "server.log"
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_WAIT_POLICY="PASSIVE", NORMVIZ_WARM="minilm")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "normviz.ui.kit.warm",
                "app.py",
                "--server.port",
                str(_free_port()),
                "--server.headless",
                "true",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if "URL: http" in log.read_text(errors="replace"):
                break
            time.sleep(1)
        time.sleep(2)  # the lines right after it listens
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    text = log.read_text(errors="replace")
    assert "URL: http" in text, text[-3000:]
    assert "normviz: warmed up minilm" in text, text[-3000:]
    noisy = [line for line in text.splitlines() if any(n in line for n in NOISY)]
    assert not noisy, noisy


def test_the_filter_keeps_other_lines_and_drops_only_while_warming():
    warm.quiet_library_noise()
    log = logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context")
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    h = Keep()
    log.addHandler(h)
    try:
        log.warning("Thread '%s': missing ScriptRunContext! This warning can be ignored.", "x")  # not warming: kept
        warm._WARMING.on = True
        log.warning("Thread '%s': missing ScriptRunContext! This warning can be ignored.", "y")  # warming: dropped
        log.warning("another line")  # kept
    finally:
        warm._WARMING.on = False
        log.removeHandler(h)
    assert records == ["Thread 'x': missing ScriptRunContext! This warning can be ignored.", "another line"]

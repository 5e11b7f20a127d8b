"""Stopping a test's app server is quick, leaves nothing behind, and runs the server's own shutdown
(:func:`tools.browser.streamlit_server`): the server gets SIGTERM, ends with status 0 once its shutdown has run
(without the interpreter's teardown: 3-8 s of garbage collection in a server that loaded models, on a loaded
machine, while the old stop waited up to 10 s before a kill), and whatever is left of its process group -- the
heavy-maps worker it started -- is killed. Chromium (:func:`tools.browser.chromium`) leaves no process either."""

from __future__ import annotations

import os
import sys
import time

import psutil
import pytest

from tests.helpers.browser import ROOT, chromium, find_browser, streamlit_server
from tools.browser import group_running

pytestmark = pytest.mark.timeout(300)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_for(path, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} was not written"
        time.sleep(0.1)
    return path.read_text()


def test_a_stopped_server_ran_its_shutdown_and_left_no_worker(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from ws_visitor import Visitor

    pid_file, log = tmp_path / "worker.pid", tmp_path / "streamlit.log"
    env = {"NORMVIZ_TEST_PID_FILE": str(pid_file)}
    with streamlit_server(env, script="tests/helpers/worker_app.py", log_path=str(log)) as url:
        port = url.rsplit(":", 1)[1]
        server = next(
            p
            for p in psutil.Process().children()
            if port in p.cmdline() and "tests/helpers/worker_app.py" in p.cmdline()
        )
        v = Visitor(url, timeout=120)
        run = v.open()
        v.close()
        assert run.exceptions == 0, run.alerts
        worker = psutil.Process(int(_wait_for(pid_file)))
        assert worker.ppid() == server.pid and "normviz.workers" in worker.cmdline()
        assert os.getpgid(worker.pid) == os.getpgid(server.pid) == server.pid  # the server's own group
        t0 = time.monotonic()
    stop_s = time.monotonic() - t0
    assert stop_s < 3, f"the stop took {stop_s:.1f} s"  # a server that outlived its SIGTERM took 10 s and a kill
    assert _gone(server.pid) and _gone(worker.pid)
    assert not group_running(server.pid)
    assert "Stopping..." in log.read_text()  # its shutdown ran (SIGTERM), not only the group's kill


@pytest.mark.skipif(find_browser() is None, reason="no chromium/chromedriver")
def test_chromium_leaves_no_process():
    with chromium() as driver:
        driver.get("about:blank")
        service = psutil.Process(driver.service.process.pid)
        tree = [service, *service.children(recursive=True)]
        assert any("chromium" in " ".join(p.cmdline()) for p in tree[1:])
    deadline = time.monotonic() + 10  # quit() returns once chromedriver ended; its browser's processes follow
    while not all(_gone(p.pid) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(p.pid) for p in tree), [p.pid for p in tree if not _gone(p.pid)]

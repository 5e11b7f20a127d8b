"""Two app processes behind Debian's nginx (``scripts/serve_many.sh``), driven through the proxy by raw websocket
visitors on both pages (``-m slow``): every visit draws its charts without an error, both processes serve, the
proxy sets its sticky cookie, and the memory of each process is printed."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def _free_port_block(n: int) -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n < 65000 and all(_free(base + k) for k in range(n + 1)):
            return base
    raise RuntimeError("no free block of ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.mark.skipif(not os.path.exists(NGINX), reason="no nginx (apt-get install nginx-light)")
def test_two_processes_behind_nginx_serve_both_pages(tmp_path):
    import psutil
    from ws_visitor import Visitor

    port = _free_port_block(2)
    env = {**os.environ, "NORMVIZ_SERVE_DIR": str(tmp_path), "NORMVIZ_TIMING": "1", "NORMVIZ_PUBLIC": "1",
           "HF_HUB_OFFLINE": "1", "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "serve_many.sh"), "2", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    assert r.status == 200 and "nvsid=" in (r.headers.get("Set-Cookie") or "")
                    break
            except OSError:
                time.sleep(1)
        else:
            raise AssertionError("the proxy did not answer")
        url = f"http://127.0.0.1:{port}"
        visits = [("", "The cat sat on the mat."), ("Overview", "A dog barked at the postman."),
                  ("", "Rain fell on the harbour."), ("Overview", "The old teacher smiled.")] * 2
        for page, text in visits:
            v = Visitor(url)
            run = v.open(urllib.parse.urlencode({"model": "minilm", "text": text}), page=page)
            v.close()
            assert run.exceptions == 0 and len(run.charts) >= 2, (page, run.alerts)
        runs = {p.name: p.read_text().count("normviz-timing") for p in tmp_path.glob("app_*.log")}
        assert len(runs) == 2 and all(n >= 1 for n in runs.values()), runs  # both processes served visitors
        rss = {p.stem: psutil.Process(int(p.read_text())).memory_info().rss / 2**20 for p in tmp_path.glob("app_*.pid")}
        print("runs per process:", runs, "RSS per process (MB):", {k: round(v) for k, v in rss.items()})
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)

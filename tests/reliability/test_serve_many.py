"""Two app processes behind Debian's nginx (``scripts/serve_many.sh``), driven through the proxy by raw websocket
visitors on both pages (``-m slow``): every visit draws its charts without an error, both processes serve, the
proxy sets its sticky cookie, and the memory of each process is printed."""
from __future__ import annotations

import os
import shutil
import sys
import urllib.parse
import urllib.request

import pytest

from ..helpers.browser import ROOT, many_servers

sys.path.insert(0, str(ROOT / "benchmarks"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


@pytest.mark.skipif(not os.path.exists(NGINX), reason="no nginx (apt-get install nginx-light)")
def test_two_processes_behind_nginx_serve_both_pages(tmp_path):
    import psutil
    from ws_visitor import Visitor

    with many_servers(2, str(tmp_path), {"NORMVIZ_TIMING": "1", "NORMVIZ_PUBLIC": "1"}) as url:
        with urllib.request.urlopen(url + "/", timeout=5) as r:
            assert r.status == 200 and "nvsid=" in (r.headers.get("Set-Cookie") or "")
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

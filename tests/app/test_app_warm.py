"""``scripts/app.sh --warm``: the default model and the default view are in the server's caches before the
first visitor, so the first Explore load records nothing."""

from __future__ import annotations

import subprocess

from normviz.ui.kit import stores
from normviz.ui.kit.state import DEFAULT_MAPS, DEFAULT_TEXT
from normviz.ui.kit.warm import warm

from ..helpers.app import ROOT, app, no_exception


def test_warm_fills_the_caches_the_first_page_load_reads():
    stores.session_cache().clear()
    done = warm()
    assert done["model"] and set(DEFAULT_MAPS) <= set(done["maps"])
    assert "minilm" in stores.model_cache()
    assert len(stores.session_cache()) == 1
    misses = stores.session_cache().misses
    at = app()
    at.run()
    no_exception(at)
    cache = stores.session_cache()
    assert len(cache) == 1 and cache.misses == misses  # the page's session is the warm one: nothing recorded
    assert at.text_input(key="w_text").value == DEFAULT_TEXT


def test_the_launcher_binds_to_loopback_and_knows_warm():
    config = (ROOT / ".streamlit" / "config.toml").read_text()
    assert 'address = "127.0.0.1"' in config
    script = (ROOT / "scripts" / "app.sh").read_text()
    assert "--warm" in script and "normviz app" in script
    assert "normviz.ui.kit.warm" in (ROOT / "normviz" / "cli" / "app.py").read_text()
    out = subprocess.run(["bash", "-n", str(ROOT / "scripts" / "app.sh")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr

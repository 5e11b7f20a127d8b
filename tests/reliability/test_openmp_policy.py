"""The app's processes run OpenMP with idle threads asleep (OMP_WAIT_POLICY=PASSIVE), set before torch loads.

OpenMP reads the policy once, when the runtime starts (torch's import), so the setting must come before any
import that may load torch: in app.py above every non-standard import, and exported by the launch scripts
(``--warm`` imports normviz, hence torch, before app.py runs). The effect itself is measured in
benchmarks/bench_load.py (README); here: that it is in place, and that a process started as the app is has it
before torch is imported.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STDLIB = {"os", "sys", "time", "pathlib"}


def _setdefault_line(tree: ast.Module) -> int | None:
    for node in tree.body:
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and sub.func.attr == "setdefault"
                and sub.args
                and isinstance(sub.args[0], ast.Constant)
                and sub.args[0].value == "OMP_WAIT_POLICY"
            ):
                return node.lineno
    return None


def test_app_sets_the_policy_before_any_import_that_may_load_torch():
    tree = ast.parse((ROOT / "app.py").read_text())
    line = _setdefault_line(tree)
    assert line is not None, "app.py no longer sets OMP_WAIT_POLICY"
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno < line:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            assert all(n.split(".")[0] in STDLIB for n in names), f"app.py imports {names} before the policy"


def test_launch_scripts_export_it():
    for script in ("scripts/app.sh", "scripts/serve_many.sh", "scripts/test.sh"):
        assert "export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}" in (ROOT / script).read_text(), script


SETTINGS = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "NORMVIZ_PUBLIC")


def _preamble_run(env: dict, after: str, before: str = "") -> list[str]:
    """app.py's preamble (everything above its first non-standard import) run in a fresh interpreter, between
    ``before`` and ``after``, with none of SETTINGS in its environment but those in ``env``; the printed words."""
    source = (ROOT / "app.py").read_text()
    probe = before + source[: source.index("import pandas")] + "\n" + after + "\n"
    base = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    out = subprocess.run(
        [sys.executable, "-c", probe], env={**base, **env}, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_a_process_started_like_the_app_sees_it_when_torch_loads():
    """app.py's preamble run in a fresh interpreter without the variable: torch then finds PASSIVE set; an
    explicit setting is kept."""
    probe = "import torch\nprint(os.environ['OMP_WAIT_POLICY'], 'torch' in sys.modules)"
    assert _preamble_run({}, probe) == ["PASSIVE", "True"]
    assert _preamble_run({"OMP_WAIT_POLICY": "ACTIVE"}, probe) == ["ACTIVE", "True"]


def _threads_probe(env: dict) -> list[str]:
    return _preamble_run(
        env,
        "import torch, numba\nprint(torch.get_num_threads(), numba.get_num_threads(), "
        "os.environ.get('OMP_NUM_THREADS'))",
    )


def test_a_public_server_runs_one_thread_per_pass_and_a_private_one_all_cores():
    cores = str(len(os.sched_getaffinity(0)))
    assert _threads_probe({"NORMVIZ_PUBLIC": "1"}) == ["1", "1", "1"]
    assert _threads_probe({}) == [cores, cores, "None"]
    explicit = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "NUMBA_NUM_THREADS": "2"}
    assert _threads_probe({"NORMVIZ_PUBLIC": "1", **explicit})[:2] == ["2", "2"]


def test_a_process_that_already_loaded_torch_keeps_its_settings():
    """AppTest runs app.py in the test's own process: there the preamble must leave the environment alone
    (numba refuses a NUMBA_NUM_THREADS different from its running pool; OpenMP would not read it anyway)."""
    words = _preamble_run(
        {"NORMVIZ_PUBLIC": "1"},
        "print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('NUMBA_NUM_THREADS'))",
        before="import os, sys, torch, numba\n",
    )
    assert words == ["None", "None"]


def test_the_preamble_reads_the_settings_without_loading_torch():
    """app.py reads NORMVIZ_PUBLIC through normviz.core.settings loaded on its own (the package's facade would load
    torch before the thread settings are in place)."""
    assert _preamble_run(
        {"NORMVIZ_PUBLIC": "yes"},
        "print('torch' in sys.modules, 'numba' in sys.modules, os.environ.get('OMP_NUM_THREADS'))",
    ) == ["False", "False", "1"]

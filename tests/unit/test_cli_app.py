"""``normviz app``: the command it replaces itself with (``--dry-run``), its options, and the ``--warm`` list;
the CLI package: one module per subcommand, found without a list to edit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from normviz.cli import main, subcommand_modules
from normviz.ui.kit.warm import warm_models

ROOT = Path(__file__).resolve().parents[2]


def _dry(capsys, *args) -> str:
    assert main(["app", "--dry-run", *args]) == 0
    return capsys.readouterr().out.strip()


def test_app_help_names_its_options():
    out = subprocess.run(
        [sys.executable, "-m", "normviz", "app", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0
    for flag in ("--warm", "--public", "--procs", "--port"):
        assert flag in out.stdout


def test_one_server_runs_streamlit_on_the_app_and_passes_other_arguments_on(capsys):
    line = _dry(capsys, "--server.address", "0.0.0.0", "--port", "8611")
    assert line.startswith(f"cd {ROOT} && ")
    assert line.endswith("-m streamlit run app.py --server.port 8611 --server.address 0.0.0.0")


def test_warm_runs_the_warm_up_first(capsys, monkeypatch):
    monkeypatch.delenv("NORMVIZ_WARM", raising=False)
    assert "-m normviz.ui.kit.warm app.py" in _dry(capsys, "--warm", "smollm2,minilm")
    assert "-m streamlit run app.py" in _dry(capsys)


def test_procs_runs_the_nginx_script(capsys):
    line = _dry(capsys, "--procs", "3", "--port", "8700", "--public")
    assert line.endswith(f"{ROOT / 'scripts' / 'serve_many.sh'} 3 8700")


def test_the_environment_the_server_gets(monkeypatch):
    from normviz.cli import app

    for name in ("NORMVIZ_PUBLIC", "NORMVIZ_WARM", "OMP_WAIT_POLICY", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    args = app.argparse.Namespace(warm="smollm2,minilm", public=True, procs=None, port=None, dry_run=True)
    argv, env, root = app.command(args, [])
    assert env["NORMVIZ_PUBLIC"] == "1" and env["NORMVIZ_WARM"] == "smollm2,minilm"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and env["OMP_NUM_THREADS"] == "1"
    assert root == ROOT and (root / argv[-1]).is_file()


@pytest.mark.parametrize(
    "args, said",
    [
        (["--procs", "0"], "--procs 0"),
        (["--port", "70000"], "--port 70000"),
        (["--procs", "2", "--server.headless", "true"], "is not passed on"),
    ],
)
def test_app_mistakes_are_one_line_exit_2(args, said, capsys):
    assert main(["app", "--dry-run", *args]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1


def test_other_subcommands_refuse_unknown_arguments(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["export", "--model", "minilm", "--text", "a", "--out", "x.npz", "--server.port", "1"])
    assert stop.value.code == 2 and "unrecognized arguments: --server.port 1" in capsys.readouterr().err


def test_warm_list():
    assert warm_models("smollm2,minilm") == ["smollm2", "minilm"]
    assert warm_models("1") == ["minilm"] and warm_models("default, smollm2") == ["minilm", "smollm2"]
    assert warm_models("0") == [] and warm_models("") == []
    assert warm_models(" SmolLM2 ,smollm2") == ["smollm2"]


def test_every_subcommand_is_one_module_of_the_cli_package():
    mods = subcommand_modules()
    assert mods[:6] == [f"normviz.cli.{n}" for n in ("export", "explain", "corpus", "align", "faithfulness", "app")]
    for name in ("cli.py", "commands.py"):
        assert not (ROOT / "normviz" / "attribution" / name).exists()
    for pkg in ("corpus", "align", "attribution"):
        assert not (ROOT / "normviz" / pkg / "cli.py").exists()

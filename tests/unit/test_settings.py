"""One settings module (:mod:`normviz.core.settings`): every ``NORMVIZ_*`` variable and every option declared once,
read there only; unknown or ill-typed options refused on one line (exit 2 in the CLI, before a model loads)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from normviz.cli import main
from normviz.core import settings
from normviz.core.errors import NormvizError

ROOT = Path(__file__).resolve().parents[2]
READS = re.compile(r"""(\.get\(|getenv\(|environ\[)\s*["']NORMVIZ_""")


def _sources(*parts: str):
    for part in parts:
        base = ROOT / part
        yield from ([base] if base.is_file() else sorted(base.rglob("*.py")))


def test_only_the_settings_module_reads_normviz_variables():
    readers = sorted(
        {
            str(p.relative_to(ROOT))
            for p in _sources("normviz", "app.py", "app_pages")
            if READS.search(p.read_text(encoding="utf-8"))
        }
    )
    assert readers == []  # every read goes through settings.env / flag / env_raw
    assert "os.environ" in (ROOT / "normviz" / "core" / "settings.py").read_text(encoding="utf-8")


def test_every_normviz_name_anywhere_is_declared():
    """A name in the code, the scripts, the tests or the docs that the table does not declare is a setting
    nobody can look up (or a typo)."""
    names: dict[str, str] = {}
    for sub in ("normviz", "app_pages", "scripts", "tests", "benchmarks", "docs", ".ci"):
        for p in sorted((ROOT / sub).rglob("*")) if (ROOT / sub).is_dir() else []:
            if p.suffix in (".py", ".sh", ".md", ".toml", ".yml", "") and p.is_file():
                for name in re.findall(r"NORMVIZ_[A-Z0-9_]*[A-Z0-9]", p.read_text(encoding="utf-8", errors="replace")):
                    names.setdefault(name, str(p.relative_to(ROOT)))
    for f in ("app.py", "README.md"):
        for name in re.findall(r"NORMVIZ_[A-Z0-9_]*[A-Z0-9]", (ROOT / f).read_text(encoding="utf-8")):
            names.setdefault(name, f)
    undeclared = {n: where for n, where in names.items() if n not in settings.ENV}
    assert undeclared == {}


def test_every_family_budget_is_a_declared_option():
    from normviz import methods

    assert set(methods.budget_options()) <= set(settings.OPTIONS)
    for name in ("explain_budget_s", "routes_budget_s", "feedforward_budget_s", "ff_budget_s"):
        assert settings.OPTIONS[name].kind == "float"


@pytest.mark.parametrize(
    "item, said",
    [
        ("map_cache_mb=abc", "map_cache_mb='abc' is not a number"),
        ("no_such_option=1", "'no_such_option' is not an option"),
        ("explain_budget_s=abc", "explain_budget_s='abc' is not a number"),
        ("explain_budget_s=nan", "explain_budget_s='nan' is not a finite number"),
        ("explain_budget_s=-3", "explain_budget_s='-3' is outside"),
        ("stop_early=maybe", "stop_early='maybe' is not a yes/no value"),
        ("rollout_normalization=sideways", "is not known; use one of standard, receptive_field"),
        ("chunk_bytes=1.5", "chunk_bytes='1.5' is not a whole number"),
    ],
)
@pytest.mark.parametrize("command", ["export", "explain"])
def test_a_bad_option_is_one_line_and_exit_2(item, said, command, tmp_path, capsys):
    out = tmp_path / "o.npz"
    rc = main([command, "--model", "minilm", "--text", "a b", "--out", str(out), "--option", item])
    err = capsys.readouterr().err
    assert rc == 2 and said in err and err.count("\n") == 1 and err.startswith("error: --option "), err
    assert not out.exists()


def test_option_values_are_typed():
    typed = settings.parse_options(
        [
            "stop_early=false",
            "compute_together=1",
            "map_cache_mb=64",
            "flow_max_tokens=12",
            "explain_budget_s=2.5",
            "rollout_normalization=Receptive-Field",
            "chunk_bytes=1e6",
        ]
    )
    assert typed == {
        "stop_early": False,
        "compute_together": True,
        "map_cache_mb": 64.0,
        "flow_max_tokens": 12,
        "explain_budget_s": 2.5,
        "rollout_normalization": "receptive_field",
        "chunk_bytes": 1000000,
    }
    assert typed["stop_early"] is False and isinstance(typed["flow_max_tokens"], int)
    assert settings.check_options({"stop_early": "false", "map_cache_mb": 8}) == {
        "stop_early": False,
        "map_cache_mb": 8.0,
    }
    with pytest.raises(NormvizError, match="Did you mean stop_early"):
        settings.check_options({"stop_eraly": True})
    with pytest.raises(NormvizError, match="not a finite number"):
        settings.check_options({"explain_budget_s": math.inf})
    with pytest.raises(NormvizError, match="not a number"):
        settings.check_options({"map_cache_mb": True})


def test_the_session_refuses_an_unknown_or_ill_typed_option(tiny_model):
    import normviz
    from tools.tiny import encoded

    lm = tiny_model("bert")
    for bad, said in (({"no_such_option": 1}, "not an option"), ({"map_cache_mb": "abc"}, "not a number")):
        with pytest.raises(NormvizError, match=said):
            normviz.Session.from_encoded(lm, [encoded(6)], options=bad)
    with pytest.raises(NormvizError, match="not an option"):
        normviz.Session(lm, "", options={"stop_erly": False}, recorded=None)
    s = normviz.Session.from_encoded(lm, [encoded(6)], options={"stop_early": "false"})[0]
    assert s.options["stop_early"] is False  # the string "false" no longer reads as true


def test_environment_values_fall_back_with_a_message():
    problems: list[str] = []
    env = {
        "NORMVIZ_MAX_TOKENS": "lots",
        "NORMVIZ_PUBLIC": "perhaps",
        "NORMVIZ_HEAVY_WORKERS": "9",
        "NORMVIZ_POOL_MB": "nan",
        "NORMVIZ_TIMING": "on",
    }
    assert settings.env("NORMVIZ_MAX_TOKENS", env, problems) == 128
    assert settings.env("NORMVIZ_PUBLIC", env, problems) is False
    assert settings.env("NORMVIZ_HEAVY_WORKERS", env, problems) == 4
    assert settings.env("NORMVIZ_POOL_MB", env, problems) == 512.0
    assert settings.flag("NORMVIZ_TIMING", env) is True and settings.flag("NORMVIZ_ONE_RUN", env) is False
    assert problems == [
        "NORMVIZ_MAX_TOKENS='lots' is not a whole number; using 128.",
        "NORMVIZ_PUBLIC='perhaps' is not a yes/no value; use 1 or 0 (true/false); using 0.",
        "NORMVIZ_HEAVY_WORKERS='9' is outside 0 … 4; using 4.",
        "NORMVIZ_POOL_MB='nan' is not a finite number; using 512.0.",
    ]
    with pytest.raises(KeyError):
        settings.env("NORMVIZ_" + "NOT_DECLARED", env)


def test_every_setting_is_documented_with_its_type_and_default():
    for s in (*settings.ENV.values(), *settings.OPTIONS.values()):
        assert s.doc and s.kind in ("flag", "int", "float", "str", "choice", "list", "path"), s
        if s.kind in ("int", "float") and s.default is not None:
            assert (s.lo is None or s.lo <= s.default) and (s.hi is None or s.default <= s.hi), s
        if s.kind == "choice":
            assert s.default in s.choices, s


def test_defaults_agree_with_the_modules_that_use_them():
    from normviz.attribution import adjoint
    from normviz.core import memory
    from normviz.methods import maxflow, zeroing
    from normviz.ui.kit import frames

    o, e = settings.OPTIONS, settings.ENV
    assert (
        o["map_cache_mb"].default == memory.MAP_CACHE_MB and o["long_map_cache_mb"].default == memory.LONG_MAP_CACHE_MB
    )
    assert o["flow_max_tokens"].default == maxflow.MAX_TOKENS and o["flow_max_work"].default == maxflow.MAX_WORK
    assert o["value_zeroing_chunk_bytes"].default == zeroing.CHUNK_BYTES
    assert o["explain_max_bytes"].default == adjoint.MAX_BYTES
    assert e["NORMVIZ_INSTANT_CELLS"].default == frames.DEFAULT_BUDGET


def test_the_settings_table_in_the_docs_is_current():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "settings_table.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_defaults_of_the_attribution_options_agree():
    from normviz.attribution import adjoint, knockout

    assert settings.OPTIONS["explain_cache_bytes"].default == adjoint.CACHE_BYTES
    assert settings.OPTIONS["intervention_batch_tokens"].default == knockout.BATCH_TOKENS

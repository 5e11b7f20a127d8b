"""Registration builds one typed record per family (defaults declared once, in normviz.methods.family), the
"all heads" view is the family's, and every cost pre-flight is one helper with one rate table."""

from __future__ import annotations

import ast
import dataclasses
import re
import types
from pathlib import Path

import pytest

from normviz import methods
from normviz.core.errors import TooCostlyError
from normviz.methods import cost, registry
from normviz.methods.base import DEFAULT_STACKS, DEFAULT_UNIT, KeyInfo, Output, Request, no_check
from normviz.methods.family import Family

ROOT = Path(__file__).resolve().parents[2]


def _module(**attrs):
    m = types.ModuleType("my_family")
    m.NAME, m.check, m.compute = "my_family", no_check, lambda inputs, keys, options: Output({})
    m.KEYS = (KeyInfo("my_map", "Mine", True, "mine"), KeyInfo("my_map_layer", "Mine, layer", False, "mine"))
    for k, v in attrs.items():
        setattr(m, k, v)
    return m


def test_a_bare_module_gets_every_default_from_the_record():
    f = Family.of(_module())
    assert (f.per_layer, f.record, f.heavy, f.needs_model, f.computed_together, f.budget) == (
        False,
        "full",
        False,
        False,
        False,
        None,
    )
    assert f.stacks == DEFAULT_STACKS and f.unit == DEFAULT_UNIT and f.requires == {} and f.opt_in == ()
    assert f.layer_views == {"my_map": "my_map_layer"}  # its own <key>_layer is its "all heads" view
    assert Family.of(_module(LAYER_VIEWS={})).layer_views == {}  # declared: the head mean
    assert not hasattr(f, "NAME")  # the record does not stand in for its module
    with pytest.raises(Exception):  # frozen
        f.heavy = True
    with pytest.raises(ValueError, match="RECORD"):
        Family.of(_module(RECORD="half"))


def test_the_registry_holds_records_and_the_layer_view_rule():
    norm = methods.family_of("norm")
    assert isinstance(norm, Family) and norm.per_layer and norm.record == "attention" and norm.computed_together
    assert methods.family_of("value_zeroing").heavy and methods.family_of("value_zeroing").needs_model
    assert methods.layer_view("norm") == "norm_layer" and methods.layer_view("cross_norm") == "cross_norm_layer"
    assert methods.layer_view("attention") is None and methods.layer_view("norm_layer") is None


def test_a_users_family_module_registers_as_a_record():
    m = _module(PER_LAYER=True, HEAVY=True)
    registry.register_family(m)
    try:
        f = methods.family("my_family")
        assert f.per_layer and f.heavy and methods.key_info("my_map").stacks == DEFAULT_STACKS
        assert methods.layer_view("my_map") == "my_map_layer"
    finally:
        registry.unregister_family("my_family")
    assert methods.family("my_family") is None


def _request(n=64, placement="post"):
    return Request(
        n_tokens=n,
        n_layers=6,
        n_heads=12,
        d_model=384,
        d_ff=1536,
        placement=placement,
        causal=False,
        gated=False,
        device="cpu",
    )


def test_every_budget_is_one_pre_flight():
    """Each family with a budget and explain's sources refuse through the same helper: the same sentence, with
    the longest input that fits; explain and routes are registered next to the families, and every rate is a row of
    the one table (the routes' too: parts scored per second)."""
    import normviz.attribution  # noqa: F401 — registers them (``import normviz`` alone is lazy)

    assert {"explain_budget_s", "routes_budget_s"} <= set(methods.all_budget_options())
    checks = [
        (f.budget, lambda o, f=f, k=f.keys[0].key: f.check(_request(), k, o))
        for f in methods.families().values()
        if f.budget is not None and f.keys
    ]
    checks += [
        (methods.computation(n).budget, lambda o, n=n: methods.computation(n).check(_request(placement="pre"), o))
        for n in ("explain", "routes")
    ]
    assert len(checks) >= 8
    for budget, check in checks:
        check({})  # no budget: nothing refused
        with pytest.raises(TooCostlyError, match=r"fits? the budget up to about \d+ tokens") as exc:
            check({budget.option: 1e-9})
        assert budget.option in str(exc.value) and "shorten the text" in str(exc.value).lower()
        assert budget.rates in cost.RATES and budget.rates in cost.RATE_OPTIONS  # one rate table


def test_one_rate_table():
    """Rates live in methods.cost.RATES only (round 3 had three tables)."""
    defined = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "normviz").rglob("*.py")
        if re.search(r"^\s*\w*FLOPS_PER_SECOND\s*=", p.read_text(), re.M)
    ]
    assert defined == []
    r = _request(512)
    assert cost.rate("feedforward", "cpu", {}) == cost.RATES["feedforward"]["cpu"]
    assert cost.rate("feedforward", "cpu", {"ff_flops_per_second": 7}) == 7.0
    assert cost.rate("default", "cuda", {}) is None  # no estimate: nothing refused
    from normviz.methods import feedforward

    n = cost.token_limit(r, 1e12, feedforward.flops)
    assert (
        feedforward.flops(Request(**{**r.__dict__, "n_tokens": n}))
        <= 1e12
        < feedforward.flops(Request(**{**r.__dict__, "n_tokens": n + 1}))
    )


def test_the_routes_rate_is_a_row_of_the_one_table(monkeypatch):
    """The routes' estimate reads cost.RATES["routes"] (parts scored per second) and its option, as every other
    budget does: doubling the table's rate halves the numbers' seconds; the edges keep their own seconds."""
    from normviz.attribution import flow

    req = _request(n=256, placement="pre")
    numbers, edges = flow.work(req, 0.0)
    base = flow.cost(req, {}, 0.0)
    assert base == pytest.approx(numbers / cost.RATES["routes"]["cpu"] + edges * flow.EDGE_SECONDS)
    monkeypatch.setitem(cost.RATES, "routes", {"cpu": 2 * cost.RATES["routes"]["cpu"]})
    assert flow.cost(req, {}, 0.0) == pytest.approx(base - numbers / (2 * flow.ROUTES_NUMBERS_PER_SECOND["cpu"]))
    assert flow.cost(req, {"routes_numbers_per_second": 1e9}, 0.0) == pytest.approx(
        numbers / 1e9 + edges * flow.EDGE_SECONDS
    )
    assert cost.RATE_OPTIONS["routes"] == "routes_numbers_per_second" and flow.BUDGET.rates == "routes"


def test_a_misspelt_family_attribute_is_an_error_at_registration():
    """``PER_LAYERS`` for ``PER_LAYER`` was silently ignored; now registration names it (a family's own constants
    that resemble no declared attribute stay its business)."""
    with pytest.raises(TypeError, match="PER_LAYERS .did you mean PER_LAYER"):
        Family.of(_module(PER_LAYERS=True))
    with pytest.raises(TypeError, match="REQUIRE .did you mean REQUIRES"):
        registry.register_family(_module(REQUIRE={"my_map": ("attention",)}))
    assert methods.family("my_family") is None
    assert Family.of(_module(CHUNK_ROWS=64)).name == "my_family"


def _declared_fields(module) -> dict[str, ast.expr]:
    """The keyword arguments of ``module``'s ``FAMILY = Family(...)``, read from its source."""
    tree = ast.parse(Path(module.__file__).read_text())
    calls = [
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["FAMILY"]
    ]
    assert len(calls) == 1 and isinstance(calls[0], ast.Call), f"{module.__name__}: one FAMILY = Family(...)"
    return {k.arg: k.value for k in calls[0].keywords if k.arg}


def _built_ins():
    return [
        f for f in registry.families().values() if f.module is not None and f.module.__name__.startswith("normviz.")
    ]


def test_built_in_families_write_no_default_out():
    """Defaults are declared once (the record's): no built-in family's ``Family(...)`` restates one
    (``opt_in=()``, ``heavy=False``)."""
    defaults = {f.name: f.default for f in dataclasses.fields(Family) if f.default is not dataclasses.MISSING}
    defaults.update(requires={}, layer_views=None)
    written = []
    for f in _built_ins():
        for name, node in _declared_fields(f.module).items():
            try:
                value = ast.literal_eval(node)
            except ValueError:
                continue  # a computed value (a Budget, papers.X) is never a default
            if name in defaults and value == defaults[name]:
                written.append(f"{f.name}.{name}")
    assert not written, f"defaults written out: {written}"


def test_each_built_in_declares_one_frozen_record():
    """Every built-in family module declares ``FAMILY = Family(...)`` and none of the old upper-case attributes;
    the registered record is that value, bound to its module (check and compute stay the module's)."""
    from normviz.methods.family import DECLARED

    built = _built_ins()
    assert len(built) == 13
    for f in built:
        assert isinstance(f.module.FAMILY, Family) and f.module.FAMILY.module is None
        assert not [a for a in DECLARED if a in vars(f.module)], f.module.__name__
        assert f.name == f.module.FAMILY.name == f.module.__name__.rsplit(".", 1)[-1]
        assert f.keys == tuple(methods.key_info(i.key) for i in f.module.FAMILY.keys)
        assert f.check is f.module.check and f.compute is f.module.compute
    with pytest.raises(TypeError, match="FAMILY and NAME"):  # one declaration, not two
        registry.register_family(_module(FAMILY=Family(name="my_family", keys=())))


def test_an_unknown_field_is_an_error_at_import():
    """A misspelt field of the record is a TypeError where it is written (the module's import); a bad record or
    group a ValueError there."""
    with pytest.raises(TypeError, match="per_layers"):
        Family(name="x", keys=(), per_layers=True)
    with pytest.raises(ValueError, match="RECORD"):
        Family(name="x", keys=(), record="half")
    with pytest.raises(ValueError, match="group"):
        Family(name="x", keys=(), group="elsewhere")
    src = "from normviz.methods.family import Family\nFAMILY = Family(name='x', keys=(), heavvy=True)\n"
    with pytest.raises(TypeError, match="heavvy"):
        exec(compile(src, "my_family.py", "exec"), {})


def test_built_ins_are_found_by_listing_the_package(tmp_path, monkeypatch):
    """The built-ins are every module of normviz.methods that declares a FAMILY, registered in their ``order``
    (the key order of ``all_keys`` is theirs); a package of one's own registers the same way."""
    assert "from . import" not in (ROOT / "normviz/methods/__init__.py").read_text()  # no hand-kept list
    orders = [f.module.FAMILY.order for f in _built_ins()]
    assert orders == sorted(orders)
    assert list(registry.families())[:13] == [
        "weights", "norms", "feedforward", "rollouts", "effective", "interactions", "globenc", "maxflow", "zeroing",
        "decompx", "cross", "knockout", "head_ablation",
    ]  # fmt: skip
    pkg = tmp_path / "my_families"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    body = (
        "from normviz.methods.base import KeyInfo, Output, no_check\n"
        "from normviz.methods.family import Family\n"
        "FAMILY = Family(name={name!r}, keys=(KeyInfo({key!r}, 'Mine', False, 'mine'),), order={order})\n"
        "check = no_check\n"
        "def compute(inputs, keys, options):\n    return Output({{}})\n"
    )
    (pkg / "late.py").write_text(body.format(name="my_late", key="my_late_map", order=2))
    (pkg / "early.py").write_text(body.format(name="my_early", key="my_early_map", order=1))
    (pkg / "helper.py").write_text("VALUE = 1\n")  # no FAMILY: not a family
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    found = registry.register_package(importlib.import_module("my_families"))
    try:
        assert [f.name for f in found] == ["my_early", "my_late"]
        assert registry.all_keys(stack=None)[-2:] == ["my_early_map", "my_late_map"]
    finally:
        for f in found:
            registry.unregister_family(f.name)

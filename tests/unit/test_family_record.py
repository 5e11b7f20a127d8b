"""Registration builds one typed record per family (defaults declared once, in normviz.methods.family), the
"all heads" view is the family's, and every cost pre-flight is one helper with one rate table."""

from __future__ import annotations

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


def test_built_in_families_write_no_default_out():
    """Defaults are declared once (the record's): no built-in family module restates one (``OPT_IN = ()``)."""
    from normviz.methods.family import DECLARED

    bare = Family.of(_module())
    field = {
        "REQUIRES": "requires",
        "OPT_IN": "opt_in",
        "NEEDS_MODEL": "needs_model",
        "HEAVY": "heavy",
        "PER_LAYER": "per_layer",
        "HOOKS_OWN_THREAD": "hooks_own_thread",
        "COMPUTED_TOGETHER": "computed_together",
        "RELEASES_ALPHA": "releases_alpha",
        "ALPHA_KEYS": "alpha_keys",
        "REFERENCES": "references",
    }
    assert set(field) <= set(DECLARED)
    written = [
        f"{f.name}.{attr}"
        for f in registry.families().values()
        for attr, name in field.items()
        if f.module is not None and attr in vars(f.module) and vars(f.module)[attr] == getattr(bare, name)
    ]
    assert not written, f"defaults written out: {written}"

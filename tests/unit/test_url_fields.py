"""The pages' query parameters are declared like settings (kind, range, choices) and read by one codec
(normviz.ui.kit.url_fields): any string for any field decodes without raising to a value the field allows, and
every value the field allows round-trips through the URL unchanged."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from normviz.ui.kit import url_fields
from normviz.ui.kit.state import ViewState
from normviz.ui.kit.steps import Step
from normviz.ui.kit.url_fields import UrlField, decode, encode, specs, url
from normviz.ui.views.translate import TranslateView
from normviz.ui.views.why import WhyView

ROOT = Path(__file__).resolve().parents[2]
VIEWS = (ViewState, WhyView, TranslateView)
FIELDS = [(view, name) for view in VIEWS for name in specs(view)]
STEPS = [
    (Step("a", 1, None, ("attention",)),),
    (Step("Weights", 0, None, ("attention", "norm")), Step("Deep", 5, 3, ("norm", "rollout_alti"))),
]
CHECK = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _allowed(spec: UrlField, value) -> bool:
    """Whether ``value`` is one the field can hold."""
    if value is None:
        return bool(spec.none) or spec.default is None
    if spec.kind == "flag":
        return isinstance(value, bool)
    if spec.kind in ("int", "float"):
        ok = isinstance(value, int if spec.kind == "int" else float) and math.isfinite(value)
        return ok and (spec.lo is None or value >= spec.lo) and (spec.hi is None or value <= spec.hi)
    if spec.kind == "choice":
        return value in spec.choices
    if spec.kind == "keys":
        return isinstance(value, tuple) and all(isinstance(k, str) and k and k == k.strip() for k in value)
    return True


def _valid(spec: UrlField) -> st.SearchStrategy:
    """Every value the field allows (what a page may write into a link)."""
    if spec.kind == "flag":
        s = st.booleans()
    elif spec.kind == "int":
        s = st.integers(
            int(spec.lo if spec.lo is not None else -(10**6)), int(spec.hi if spec.hi is not None else 10**6)
        )
    elif spec.kind == "float":
        lo, hi = spec.lo if spec.lo is not None else -1e3, spec.hi if spec.hi is not None else 1e3
        s = st.floats(lo, hi).map(lambda x: round(x, spec.digits) if spec.digits is not None else x)
    elif spec.kind == "choice":
        s = st.sampled_from(spec.choices)
    elif spec.kind == "keys":
        names = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True)
        s = st.lists(names, max_size=4, unique=True).map(tuple)
        if spec.check is not None:  # diff: none, or two different maps
            s = st.one_of(st.just(()), st.lists(names, min_size=2, max_size=2, unique=True).map(tuple))
    elif spec.kind == "custom":
        s = st.sampled_from(STEPS)
    else:
        s = st.text(max_size=min(spec.limit, 80))
        if spec.required:
            s = s.filter(str.strip)
        if spec.strip:
            s = s.filter(lambda t: t == t.strip())
        if spec.check is not None:
            s = s.filter(_passes(spec))
    if spec.none:
        s = st.one_of(st.none(), s)
    return s


def _passes(spec):
    def ok(value) -> bool:
        try:
            spec.check(value)
        except ValueError:
            return False
        return True

    return ok


@pytest.mark.parametrize("view,name", FIELDS, ids=[f"{v.__name__}.{n}" for v, n in FIELDS])
@CHECK
@given(raw=st.one_of(st.text(max_size=50), st.sampled_from(["", " ", "-1", "1e309", "nan", "ALL", "2", ",,", "~"])))
def test_any_string_decodes_without_raising(view, name, raw):
    spec = specs(view)[name]
    read = decode(spec, raw)
    assert _allowed(spec, read.value) or spec.kind == "custom", (raw, read)
    if read.why is not None and not read.clamped:
        assert read.value == spec.default  # a bad value falls back
    got = view.from_query({name: raw})  # the view's reader never raises either
    assert isinstance(got.problems, list)


@pytest.mark.parametrize("view,name", FIELDS, ids=[f"{v.__name__}.{n}" for v, n in FIELDS])
@CHECK
@given(data=st.data())
def test_a_valid_value_round_trips(view, name, data):
    spec = specs(view)[name]
    value = data.draw(_valid(spec))
    back = view.from_query({name: encode(spec, value)})
    assert getattr(back, name) == value and back.problems == [], (value, encode(spec, value), back.problems)
    assert view.from_query(dataclasses.replace(view(), **{name: value}).to_query()) == back


def test_out_of_range_numbers_are_clamped_and_bad_values_fall_back():
    got = ViewState.from_query({"threshold": "2", "head": "-3", "layer": "two", "values": "weird"})
    assert got.threshold == 0.9 and got.head is None and got.layer == 0 and got.values == "share"
    assert len(got.problems) == 4 and "using 0.9" in got.problems[-1] and "0 or more, or all" in got.problems[1]
    assert WhyView.from_query({"tau": "0.001", "steps": "1000"}) == WhyView(tau=0.01, steps=64)
    assert WhyView.from_query({"position": "-1"}).position is None  # "-1" means the last token
    assert TranslateView.from_query({"setting": "awi", "theme": " Dark "}) == TranslateView(setting="AWI", theme="dark")


def test_fields_are_declared_once():
    """Every view field but ``problems`` is declared with url() (its default there only); a bad declaration fails
    where it is written; the pages' hand-written decoders are gone."""
    for view in VIEWS:
        assert set(specs(view)) == {f.name for f in dataclasses.fields(view)} - {"problems"}
    with pytest.raises(ValueError, match="kind"):
        url(0, "number")
    with pytest.raises(ValueError, match="default"):
        url("x", "choice", choices=("a", "b"))
    sources = [*(ROOT / "normviz/ui").rglob("*.py"), *(ROOT / "app_pages").glob("*.py")]
    hand = [str(p.relative_to(ROOT)) for p in sources if re.search(r"def _?decode(_bool)?\(", p.read_text())]
    # the codec, and the grammar of one custom field's value (a talk's steps: name~layer~head~maps;…)
    assert sorted(hand) == ["normviz/ui/kit/steps.py", str(Path(url_fields.__file__).relative_to(ROOT))]

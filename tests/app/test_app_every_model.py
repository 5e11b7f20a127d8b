"""Issue 42's habit: every self-attention page on every embedded model (tests/app/models.py reads the registry,
so a new embedded model is picked up), opened on stage, then stage off (what Esc and the sidebar toggle do: the
same leave), then on again -- no exception and no "Something went wrong" at any step, and on stage the page has
the stage keyboard (its Esc). On 4c42c33: Trust broke on smollm2 (UnboundLocalError), Why broke after leaving
stage (its graph's download key set again), and Overview, Learn, Trust and Corpus had no keyboard (Esc did
nothing)."""

from __future__ import annotations

import pytest

from ..helpers.app import app, no_exception
from ..helpers.why import TEXT as WHY_TEXT
from .models import MODELS

pytestmark = pytest.mark.timeout(1800)
PAGES = {
    "Explore": "app.py",
    "Why": "app_pages/0_Why.py",
    "Overview": "app_pages/1_Overview.py",
    "Learn": "app_pages/2_Learn.py",
    "Corpus": "app_pages/3_Corpus.py",
    "Trust": "app_pages/5_Trust.py",
}
TEXT = WHY_TEXT  # "The capital of France is": 5 tokens, the sentence the Why and Trust tests use (Trust's
# interventions, per token, took 80-100 s a model on a 13-token sentence under load)


def broken(at) -> list[str]:
    """What a visitor would read as a failure: an exception box, or the page's own top-level catch."""
    return [e.value for e in at.exception] + [e.value for e in at.error if "Something went wrong" in e.value]


def stage_keys(at) -> int:
    return sum(1 for el in at.get("bidi_component") if getattr(el.proto, "component_name", "") == "normviz_stage_keys")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("page", list(PAGES))
def test_page_on_model_through_stage_on_off_on(page, model):
    at = app(PAGES[page], {"model": model, "text": TEXT, "present": "1"})
    at.run(timeout=900)
    no_exception(at)
    assert not broken(at), (page, model, "stage", broken(at))
    assert stage_keys(at) == 1, f"{page} on stage has no stage keyboard (Esc)"
    for present in (False, True):
        at.sidebar.toggle(key="w_present").set_value(present)
        at.run(timeout=900)
        assert not broken(at), (page, model, present, broken(at))
        assert stage_keys(at) == (1 if present else 0), (page, present)

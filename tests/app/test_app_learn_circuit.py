"""Issue 41: Learn's lesson "find the induction circuit". On the shipped induction benchmark the induction head's
score of the last token → the token after its earlier occurrence, split exactly by Session.attend, is written on
the key side mostly by the previous-token heads, from the earlier occurrence (K-composition); the view draws the
library's numbers and the Learn page hooks it in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from normviz import circuits
from normviz.circuits.lesson import k_composition
from normviz.ui.views import learn_circuit as LC

from ..helpers.app import ROOT, app, arr, figures, no_exception


def _view():
    import streamlit as st

    from normviz.ui.kit import st_parts as ui
    from normviz.ui.views import learn_circuit as LC

    LC.render(ui, st)


def test_k_composition_is_exact_and_finds_the_previous_token_heads():
    bench = circuits.load("induction")
    for example in (0, 1):
        for head in (0, 4):
            k = k_composition(example, head, bench)
            ids = bench.examples[example][0]
            assert ids[k.earlier] == ids[k.query] and k.key == k.earlier + 1
            # exact: the key-side parts (by component and by source token) sum to the score, and that is the
            # model's own q·k (a float32 model: the two splittings and the model round differently, ~1e-7)
            assert abs(k.key_side.sum() - k.total) < 1e-9
            assert abs(k.key_tokens.sum() - k.total) < 1e-6 * abs(k.total)
            assert abs(k.total - k.model_score) < 1e-5 * abs(k.model_score)
            assert int(np.argmax(k.scores)) == k.key and int(np.argmax(k.attention)) == k.key
            # K-composition: the two largest key-side parts are the previous-token heads, over half the score,
            # and the earlier occurrence is the largest source token of the key side
            assert {c for c, _ in k.ranked(2)} == {f"L{l}.H{h}" for l, h in bench.roles["previous token"]}
            assert k.previous_share > 0.5
            assert int(np.argmax(k.key_tokens[:-1])) == k.earlier


def test_the_lesson_draws_the_library_numbers():
    at = AppTest.from_function(_view, default_timeout=120)
    at.run()
    no_exception(at)
    assert not figures(at)  # nothing loads until asked
    at.toggle(key=LC.TOGGLE).set_value(True).run()
    no_exception(at)
    at.selectbox(key="w_learn_induction_example").set_value(1).run()
    at.selectbox(key="w_learn_induction_head").set_value(3).run()
    no_exception(at)
    k = k_composition(1, 3)
    attention, comps, tokens = figures(at)
    np.testing.assert_allclose(arr(attention["data"][0]["y"]), k.attention)
    np.testing.assert_allclose(arr(comps["data"][0]["y"]), k.key_side)
    assert list(comps["data"][0]["x"]) == k.components
    np.testing.assert_allclose(arr(tokens["data"][0]["y"]), k.key_tokens)
    red = [x for x, c in zip(comps["data"][0]["x"], comps["data"][0]["marker"]["color"]) if c == "#d62728"]
    assert red == [f"L{l}.H{h}" for l, h in k.previous_token]
    said = " ".join(m.value for m in at.markdown).replace("\\", "")  # ui.plain escapes punctuation
    assert f"write {k.previous_share:.0%} of the score" in said and f"{k.total:.3f}" in said


def test_the_learn_page_hooks_the_lesson():
    page = (Path(ROOT) / "app_pages" / "2_Learn.py").read_text(encoding="utf-8")
    assert "learn_circuit.render(ui, st, fs)" in page
    at = app("app_pages/2_Learn.py", {"model": "minilm"})
    at.run()
    no_exception(at)
    assert LC.TITLE in [h.value for h in at.subheader]
    before = len(figures(at))
    at.toggle(key=LC.TOGGLE).set_value(True).run()
    no_exception(at)
    k = k_composition(0, bench=circuits.load("induction"))
    drawn = figures(at)[before:]
    assert len(drawn) == 3
    np.testing.assert_allclose(arr(drawn[1]["data"][0]["y"]), k.key_side)


def test_lesson_induction_link_opens_the_lesson_first_and_running():
    """?lesson=induction: the lesson is drawn above the rest of the page, its toggle already on (its three charts
    are the page's first figures), no 'not a lesson' warning; the Known circuits view links to it."""
    at = app("app_pages/2_Learn.py", {"model": "minilm", "lesson": "induction"})
    at.run()
    no_exception(at)
    assert at.toggle(key=LC.TOGGLE).value is True
    assert [h.value for h in at.subheader][0] == LC.TITLE
    k = k_composition(0, bench=circuits.load("induction"))
    np.testing.assert_allclose(arr(figures(at)[1]["data"][0]["y"]), k.key_side)
    assert not [w for w in at.warning if "not a lesson" in w.value]
    assert [h.value for h in at.subheader].count(LC.TITLE) == 1
    from normviz.ui.views import learn

    assert "induction" in learn.unknown_lesson("x", ["norm"], "Norm")
    view = (Path(ROOT) / "normviz" / "ui" / "views" / "known_circuits.py").read_text(encoding="utf-8")
    assert '{"lesson": "induction"}' in view and LC.opens("induction") and not LC.opens("norm")

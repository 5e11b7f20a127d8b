"""Pure UI helpers: URL state, special-token hiding, colour ranges, exports, bounded caches."""

import csv
import io
import threading
import time

import numpy as np
import pytest

from normviz.ui.kit import data
from normviz.ui.kit.cache import BoundedCache
from normviz.ui.kit.state import ViewState, check_model_allowed, load_examples, model_allowlist, token_cap
from normviz.ui.views import learn

from ..helpers.maps import in_threads


def test_view_round_trips_through_the_query_string():
    v = ViewState(
        text="A b.",
        pair="C d.",
        model="smollm2",
        layer=4,
        head=2,
        maps=("norm", "ff"),
        hide_special=True,
        shared_scale=False,
        values="raw",
        focus=3,
        present=True,
    )
    q = v.to_query()
    assert all(isinstance(x, str) for x in q.values())
    back = ViewState.from_query(q)
    assert back == v and back.problems == []


def test_default_view_gives_an_empty_query_and_head_all():
    assert ViewState().to_query() == {}
    assert ViewState.from_query({"head": "all"}).head is None
    assert ViewState.from_query({"layer": ["1", "2"]}).layer == 2  # a repeated key: the last value


def test_bad_query_values_fall_back_and_are_reported():
    v = ViewState.from_query({"layer": "two", "head": "-3", "values": "weird", "hide_special": "maybe", "text": "ok"})
    assert v.layer == 0 and v.head is None and v.values == "share" and v.hide_special is False
    assert v.text == "ok"
    assert len(v.problems) == 4 and any("layer" in p for p in v.problems)


def test_hiding_special_tokens_renormalises_rows():
    m = np.array([[0.5, 0.25, 0.25], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6]])
    special = np.array([True, False, False])
    shown, keep = data.shown_matrix(m, special, hide_special=True, values="share")
    assert keep == [1, 2]
    assert np.allclose(shown.sum(1), 1)
    assert np.allclose(shown[0], [0.75, 0.25])
    raw, _ = data.shown_matrix(m * 10, special, hide_special=True, values="raw")
    assert np.allclose(raw.sum(1), (m * 10)[1:].sum(1))  # raw keeps each row's original total
    same, keep = data.shown_matrix(m * 10, special, hide_special=False, values="raw")
    assert keep == [0, 1, 2] and np.allclose(same, m * 10)


def test_row_shares_handle_zero_rows_and_signs():
    m = np.array([[0.0, 0.0], [-1.0, 3.0]])
    s = data.row_shares(m)
    assert np.allclose(s, [[0, 0], [-0.25, 0.75]])


def test_color_ranges_shared_or_per_panel():
    p1 = data.Panel("a", "A", np.array([[0.0, 1.0]]), ["x"], ["x"], [0])
    p2 = data.Panel("b", "B", np.array([[0.0, 4.0]]), ["x"], ["x"], [0])
    assert data.color_range([p1, p2], True) == [(0.0, 4.0), (0.0, 4.0)]
    assert data.color_range([p1, p2], False) == [(0.0, 1.0), (0.0, 4.0)]
    p3 = data.Panel("c", "C", np.array([[-2.0, 1.0]]), ["x"], ["x"], [0])
    assert data.color_range([p3], False) == [(-2.0, 2.0)]


def test_shared_scales_keep_per_head_maps_apart_from_whole_layer_maps():
    """Issue 23: a residual map's diagonal must not set α's and ‖αf‖'s maximum."""
    att = data.Panel("attention", "A", np.array([[0.1, 0.3]]), ["x"], ["x"], [0])
    nrm = data.Panel("norm", "N", np.array([[0.2, 0.1]]), ["x"], ["x"], [0])
    res = data.Panel("norm_res", "R", np.array([[0.9, 0.1]]), ["x"], ["x"], [0])
    assert data.scale_group("attention") == data.scale_group("norm") != data.scale_group("norm_res")
    assert data.color_range([att, res, nrm], True) == [(0.0, 0.3), (0.0, 0.9), (0.0, 0.3)]


def test_largest_difference_names_the_cell_where_row_shares_differ_most():
    """Issue 23's callout: row 'it' gives [CLS] 0.6 of its weight but 0.2 of its norm; the other cells differ less."""
    labels = ["[CLS]", "it", "was"]
    att = data.Panel(
        "attention", "A", np.array([[1.0, 0, 0], [0.6, 0.3, 0.1], [0.2, 0.3, 0.5]]), labels, labels, [0, 1, 2]
    )
    nrm = data.Panel("norm", "N", np.array([[2.0, 0, 0], [0.4, 1.2, 0.4], [0.4, 0.6, 1.0]]), labels, labels, [0, 1, 2])
    d = data.largest_difference(att, nrm)
    assert (d.row, d.col) == ("it", "[CLS]") and np.isclose(d.share_a, 0.6) and np.isclose(d.share_b, 0.2)
    assert data.callout_text(d) == "Largest difference: α gives 60 % of row “it” to “[CLS]”; ‖αf‖ 20 %."
    assert data.largest_difference(att, att) is None  # they agree: nothing to call out
    masked = data.Panel(
        "norm", "N", np.where(np.triu(np.ones((3, 3)), 1) > 0, np.nan, att.matrix), labels, labels, [0, 1, 2]
    )
    assert data.largest_difference(att, masked).share_b == 0.0  # a NaN (masked) cell counts as 0
    assert data.weights_norm_pair([nrm, att])[0] is att and data.weights_norm_pair([att]) is None


def test_unique_labels_mark_repeats():
    assert data.unique_labels(["the", "cat", "the", " "]) == ["the", "cat", "the·2", "' '"]


def _panels():
    m = np.array([[0.5, 0.5], [0.25, 0.75]])
    return [data.Panel("norm", "Norm · layer 0", m, ["a", "b"], ["a", "b"], [1, 2])]


def test_csv_export_has_every_shown_cell():
    rows = list(csv.reader(io.StringIO(data.panels_csv(_panels()).decode())))
    assert rows[0] == [
        "map",
        "panel",
        "row_position",
        "row_token",
        "column_position",
        "column_token",
        "value",
        "masked",
    ]
    assert len(rows) == 1 + 4
    assert rows[2] == ["norm", "Norm · layer 0", "1", "a", "2", "b", "0.5", "0"]


def test_csv_export_of_a_decoder_leaves_its_masked_cells_empty():
    """A decoder's j > i cells hold 0 in the map: written as 0 they would read as measured zeros."""
    rows = list(csv.reader(io.StringIO(data.panels_csv(_panels(), causal=True).decode())))
    by_cell = {(r[2], r[4]): (r[6], r[7]) for r in rows[1:]}
    assert by_cell[("1", "2")] == ("", "1")  # column after row: masked, no value
    assert by_cell[("2", "1")] == ("0.25", "0") and by_cell[("1", "1")] == ("0.5", "0")
    assert "empty value" in data.CSV_MASKED_NOTE


def test_npz_export_round_trips():
    z = np.load(io.BytesIO(data.panels_npz(_panels(), ["[CLS]", "a", "b"])))
    assert list(z["tokens"]) == ["[CLS]", "a", "b"]
    assert np.allclose(z["norm"], [[0.5, 0.5], [0.25, 0.75]]) and list(z["norm__positions"]) == [1, 2]


def test_special_share_per_head():
    stack = np.zeros((1, 2, 3, 3))
    stack[0, 0, :, 0] = 1.0  # head 0: everything to token 0 (special)
    stack[0, 1] = 1.0  # head 1: uniform
    share = data.special_share(stack, np.array([True, False, False]))
    assert np.allclose(share, [[1.0, 1 / 3]])


def test_bounded_cache_evicts_oldest_and_computes_once():
    c = BoundedCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # a is now the most recent
    c.put("c", 3)
    assert "b" not in c and "a" in c and len(c) == 2
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return 42

    threads = [threading.Thread(target=lambda: c.get_or_compute("k", slow)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and c.get("k") == 42 and c.misses == 1
    with pytest.raises(ValueError):
        BoundedCache(0)


def test_deployment_settings_from_env():
    assert model_allowlist({}) is None
    allow = model_allowlist({"NORMVIZ_ALLOWED_MODELS": "minilm, smollm2"})
    assert allow == ["minilm", "smollm2"]
    assert check_model_allowed("MiniLM", allow) is None
    assert "not available on this deployment" in check_model_allowed("gpt2", allow)
    assert token_cap({}) == 128 and token_cap({"NORMVIZ_MAX_TOKENS": "40"}) == 40
    assert token_cap({"NORMVIZ_MAX_TOKENS": "lots"}) == 128


def test_examples_file_parses(tmp_path):
    from pathlib import Path

    ex = load_examples(Path(__file__).resolve().parents[2] / "assets" / "examples.txt")
    assert len(ex) >= 4 and any(pair for _, pair in ex)
    assert load_examples(tmp_path / "missing.txt")[0][0]


def test_value_norms_recovered_from_a_head():
    rng = np.random.default_rng(0)
    alpha = rng.random((3, 3))
    alpha /= alpha.sum(1, keepdims=True)
    fx = np.array([0.5, 2.0, 1.0])
    col, spread = learn.value_norms_from(alpha, alpha * fx[None, :])
    assert np.allclose(col, fx) and spread < 1e-12


def test_every_registered_map_of_the_design_has_a_lesson():
    """Keys the design names get a written lesson; any other registered key falls back to its description."""
    import normviz

    design = {
        "attention",
        "norm",
        "norm_layer",
        "attn_res",
        "attn_res_ln",
        "ff",
        "ff_res",
        "ff_res_ln",
        "rollout_attention",
        "rollout_attn_res",
        "rollout_attn_res_ln",
        "rollout_ff_res",
        "rollout_ff_res_ln",
        "flow",
        "effective_attention",
        "alti",
        "rollout_alti",
        "value_zeroing",
    }
    assert design <= set(learn.LESSONS)
    for key in normviz.all_keys():
        if key in design:
            assert learn.LESSONS[key].latex and learn.papers_of(key)  # papers: the family's REFERENCES


def test_concurrent_analyses_of_one_shared_model_do_not_mix(minilm):
    """The app's sessions (ui.session_for / ui.get_maps) of one shared model in threads: normviz records with
    forward hooks on the shared model, so passes must not mix."""
    import normviz
    from normviz.ui.kit import st_parts

    texts = ["The cat sat on the mat, a thread test.", "Dogs bark at night, loudly and often, in threads."]
    alone = [normviz.analyze(minilm, t, methods=["attention", "norm"])["norm"] for t in texts]
    results = {}

    def run(i):
        session = st_parts.session_for(minilm, texts[i % 2], "")
        results[i] = st_parts.get_maps(session, ["attention", "norm"])["norm"]

    in_threads(run, 4)
    assert len(results) == 4
    for i, arr in results.items():
        assert np.allclose(arr, alone[i % 2], atol=1e-5)
    assert st_parts.session_for(minilm, texts[0], "").forward_passes == 1  # one shared session per text


def _ff_request(n, n_layers, d, d_ff, gated):
    from normviz.methods.base import Request

    return Request(
        n_tokens=n,
        n_layers=n_layers,
        n_heads=1,
        d_model=d,
        d_ff=d_ff,
        placement="pre" if gated else "post",
        causal=gated,
        gated=gated,
        device="cpu",
    )


def test_ff_budget_lets_minilm_through_and_stops_long_smollm2_texts():
    """The feedforward family's cost check (option ff_budget_s, set by the app from NORMVIZ_FF_BUDGET):
    minilm (6 × 384 × 1536, GELU) stays under the default 60 s at the 128-token cap; smollm2 (30 × 576 × 1536,
    SwiGLU, causal) is refused just above the token limit the check itself names, and accepted below it."""
    import re

    from normviz.core.errors import TooCostlyError
    from normviz.methods import cost, feedforward

    rate = cost.RATES["feedforward"]["cpu"]
    budget = {"ff_budget_s": 60}
    assert feedforward.flops(_ff_request(128, 6, 384, 1536, False)) / rate < 60
    feedforward.check(_ff_request(128, 6, 384, 1536, False), "ff", budget)
    assert cost.token_limit(_ff_request(1, 6, 384, 1536, False), 60 * rate, feedforward.flops) >= 128
    limit = cost.token_limit(_ff_request(1, 30, 576, 1536, True), 60 * rate, feedforward.flops)
    assert 40 <= limit < 1000
    feedforward.check(_ff_request(limit, 30, 576, 1536, True), "ff_res", budget)
    with pytest.raises(TooCostlyError, match="NORMVIZ_FF_BUDGET") as exc:
        feedforward.check(_ff_request(limit + 2, 30, 576, 1536, True), "ff_res", budget)
    assert int(re.search(r"to about (\d+) tokens", str(exc.value)).group(1)) == limit
    # a tighter budget refuses smollm2's default sentence length
    with pytest.raises(TooCostlyError):
        feedforward.check(_ff_request(41, 30, 576, 1536, True), "ff_res", {"ff_budget_s": 0.01})


def test_session_options_carry_the_budgets(monkeypatch):
    from normviz.ui.kit import st_parts

    for name in ("NORMVIZ_FF_BUDGET", "NORMVIZ_COST_BUDGET", "NORMVIZ_MEMORY_BUDGET_MB"):
        monkeypatch.delenv(name, raising=False)
    from normviz import methods

    ff = methods.budget_option("ff")
    # every key's budget option (its KeyInfo) reaches the app's sessions: no table of names in ui/
    wanted = {methods.key_info(k).budget_option for k in methods.all_keys()} - {None}
    wanted |= set(methods.budget_options())  # and the keyless families' (knockout, head_ablation)
    costly = set(methods.all_budget_options()) - {ff}  # the keys' and the Why page's computations' (explain, routes)
    assert wanted - {ff} <= costly and {"explain_budget_s", "routes_budget_s"} <= costly
    assert ff == "feedforward_budget_s" and {"zeroing_budget_s", "interactions_budget_s", "decompx_budget_s"} <= costly
    mem = "memory_budget_mb"
    routes = "routes_budget_s"  # the Why page's routes (issue 29: refused over it, stopped at 4× it)
    # keyless families (issue 31's interventions) are cost-checked through the same budget
    costly |= {"knockout_budget_s", "head_ablation_budget_s"}
    assert st_parts.session_options(None) == {
        ff: 60.0,
        **{k: 60.0 for k in costly},
        routes: 60.0,
        mem: 2048.0,
        "stop_early": False,
    }
    monkeypatch.setenv("NORMVIZ_FF_BUDGET", "5")
    monkeypatch.setenv("NORMVIZ_COST_BUDGET", "7")
    monkeypatch.setenv("NORMVIZ_MEMORY_BUDGET_MB", "512")
    assert st_parts.session_options(None) == {
        ff: 5.0,
        **{k: 7.0 for k in costly},
        routes: 7.0,
        mem: 512.0,
        "stop_early": False,
    }
    monkeypatch.setenv("NORMVIZ_FF_BUDGET", "lots")  # an invalid value falls back to the default
    assert st_parts.session_options(None)[ff] == 60.0


def test_overview_npz_holds_every_grid():
    s = np.random.default_rng(1).random((2, 3, 4, 4))
    z = np.load(io.BytesIO(data.stacks_npz({"attention": s, "ff": s[:, :1]}, ["a", "b", "c", "d"])))
    assert np.allclose(z["attention"], s) and z["ff"].shape == (2, 1, 4, 4) and list(z["tokens"]) == list("abcd")


def test_the_server_process_fixes_the_mmap_threshold():
    """normviz.ui.kit.memory: large freed buffers go back to the system (the RSS bound itself: the slow
    tests/reliability RSS test)."""
    import sys

    from normviz.ui.kit.memory import bound_heap

    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's mallopt is Linux-only")
    assert bound_heap() is True
    assert bound_heap() is True  # once per process, idempotent

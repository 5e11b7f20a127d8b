"""Issue 31: the faithfulness scores (normviz.trust) against computations written here independently — ranks by
scipy over the positions that knockout can reach, gradients by torch.autograd on the head model's own forward,
AOPC by replacing token ids and running the head model once per erased input — on tiny float64 models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import normviz
from normviz.trust import bootstrap_ci, explain_text, faithfulness
from normviz.trust.report import Faithfulness

from ..helpers import tiny

KEYS = ["attention", "norm", "attn_res_ln", "rollout_attn_res"]


def _session(lm, enc):
    return normviz.Session.from_encoded(lm, [enc])[0]


def _score(hm, ids, i, token, foil=None, embeds=None):
    kwargs = {"inputs_embeds": embeds} if embeds is not None else {"input_ids": torch.tensor([ids])}
    logits = hm(**kwargs).logits[:, i].to(torch.float64)
    return logits[:, token] - (logits[:, foil] if foil is not None else 0.0)


@pytest.fixture(scope="module")
def llama_text(head_model):
    lm = head_model("llama")
    enc = tiny.encoded(n=8, seed=5)
    return lm, enc, explain_text(_session(lm, enc), KEYS, ig_steps=64, baseline_id=3)


def test_rank_scores_are_scipy_over_the_positions_knockout_reaches(llama_text):
    lm, enc, t = llama_text
    assert t.position == 7 and list(t.scored) == list(range(7))  # causal: j < i
    a = normviz.Session.from_encoded(lm, [enc])[0].get(["attention", "rollout_attn_res"])
    att = a["attention"][-1, :, 7, :].mean(0)
    assert np.allclose(t.attributions["attention"], att)
    assert np.allclose(t.attributions["rollout_attn_res"], a["rollout_attn_res"][-1, 7, :])
    for key in ("sources", "attention", "input_x_gradient"):
        x, y = t.attributions[key][:7], t.knockout.delta[:7]
        assert t.spearman[key] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
        assert t.kendall[key] == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
    assert abs(t.gaps["sources"]) <= 2e-6 * max(1.0, abs(t.total))  # exact (Llama: float32 softmax, as test_sources)
    # the direct head parts against head ablation, over all L·H heads
    assert t.spearman_heads["direct_heads"] == pytest.approx(
        stats.spearmanr(t.head_attributions["direct_heads"].ravel(), t.head_ablation.delta.ravel()).statistic
    )


def test_gradients_equal_autograd_on_the_head_model(llama_text):
    lm, enc, t = llama_text
    hm = lm.head_model
    e = hm.get_input_embeddings()(torch.tensor([enc.ids])).detach()
    x = e.clone().requires_grad_(True)
    f = _score(hm, enc.ids, 7, t.knockout.token, embeds=x)
    (g,) = torch.autograd.grad(f.sum(), x)
    ixg = (g[0] * e[0]).sum(-1).numpy()
    assert np.abs(t.attributions["input_x_gradient"] - ixg).max() <= 1e-10
    assert t.gaps["input_x_gradient"] == pytest.approx(float(f) - ixg.sum(), abs=1e-10)
    # integrated gradients: 64 midpoint nodes from the pad token's embedding, computed one node at a time
    assert "64 midpoint steps" in t.baselines["integrated_gradients"]
    bid = int(t.baselines["integrated_gradients"].split("(id ")[1].split(")")[0])
    assert bid == 3
    b = hm.get_input_embeddings()(torch.tensor([[bid] * len(enc.ids)])).detach()
    total = torch.zeros_like(e)
    for k in range(64):
        xs = (b + (k + 0.5) / 64 * (e - b)).requires_grad_(True)
        (gk,) = torch.autograd.grad(_score(hm, enc.ids, 7, t.knockout.token, embeds=xs).sum(), xs)
        total += gk / 64
    ig = (total[0] * (e - b)[0]).sum(-1).numpy()
    assert np.abs(t.attributions["integrated_gradients"] - ig).max() <= 1e-9
    ends = _score(hm, enc.ids, 7, t.knockout.token, embeds=torch.cat([e, b])).detach()
    assert t.gaps["integrated_gradients"] == pytest.approx(float(ends[0] - ends[1]) - ig.sum(), abs=1e-9)


def test_aopc_equals_erasing_and_rerunning_the_head_model(llama_text):
    lm, enc, t = llama_text
    hm, i, n = lm.head_model, 7, len(enc.ids)
    bid = int(t.baselines["erasure"].split("(id ")[1].split(")")[0])
    base = float(_score(hm, enc.ids, i, t.knockout.token).detach())
    for key in ("sources", "attention", "knockout"):
        values = t.knockout.delta if key == "knockout" else t.attributions[key]
        cand = [j for j in range(n) if j != i]
        order = sorted(cand, key=lambda j: -values[j])
        comp, suff = [], []
        for k in (0.1, 0.3, 0.5):
            top = set(order[: max(1, math.ceil(k * len(cand)))])
            c_ids = [bid if j in top else tok for j, tok in enumerate(enc.ids)]
            s_ids = [bid if (j in cand and j not in top) else tok for j, tok in enumerate(enc.ids)]
            with torch.no_grad():
                comp.append(base - float(_score(hm, c_ids, i, t.knockout.token)))
                suff.append(base - float(_score(hm, s_ids, i, t.knockout.token)))
        assert t.aopc[key]["comprehensiveness"] == pytest.approx(np.mean(comp), abs=1e-10)
        assert t.aopc[key]["sufficiency"] == pytest.approx(np.mean(suff), abs=1e-10)


def test_bootstrap_interval_brackets_the_mean_and_nans_are_counted_out():
    mean, lo, hi, n = bootstrap_ci([0.1, 0.5, np.nan, 0.9, 0.3])
    assert n == 4 and mean == pytest.approx(0.45) and lo <= mean <= hi and lo >= 0.1 and hi <= 0.9
    assert bootstrap_ci([np.nan])[3] == 0


def test_faithfulness_over_texts_per_text_and_summary(head_model, monkeypatch):
    lm = head_model("bert")
    encs = [tiny.encoded(n=6, seed=s) for s in (1, 2, 3)]
    texts = [
        explain_text(_session(lm, e), ["attention", "norm"], heads=(k == 0), gradients=False, baseline_id=3)
        for k, e in enumerate(encs)
    ]
    f = Faithfulness(model="tiny", texts=texts)
    assert f.spearman["attention"].shape == (3,)
    assert f.spearman["norm"][1] == texts[1].spearman["norm"]
    assert f.spearman_heads["direct_heads"].shape == (3,) if "direct_heads" in f.spearman_heads else True
    rows = {(r["key"], r["score"]): r for r in f.summary()}
    assert rows[("norm", "spearman")]["mean"] == pytest.approx(np.nanmean(f.spearman["norm"]))
    assert "| attribution |" in f.table()
    # BERT (an encoder): the position of [CLS]-like position 0 without a mask token; every other token scored
    assert texts[0].position == 0 and list(texts[0].scored) == [1, 2, 3, 4, 5]


def test_faithfulness_lists_texts_it_cannot_score(minilm):
    """An empty line and a 2-token line are skipped with why (never silently dropped); minilm has no LM head, so
    its ground truth is how far [CLS]'s final state moves (measure "state")."""
    f = faithfulness(
        minilm,
        ["", "The cat sat on the mat."],
        ["attention", "norm"],
        heads=False,
        gradients=False,
        erase=False,
        max_tokens=8,
    )
    assert [k for k, _ in f.skipped] == [0] and "empty" in f.skipped[0][1]
    assert len(f.texts) == 1 and f.texts[0].measure == "state" and f.texts[0].position == 0
    assert np.all(f.texts[0].knockout.delta >= 0)
    assert f.settings["max_tokens"] == 8 and len(f.texts[0].tokens) == 8


def test_a_shard_scores_what_one_process_scores(minilm):
    """The ray engine runs faithfulness on slices of the corpus (first_index = the slice's offset): every key,
    the seeded random baseline included, equals the one-process run's (the random key differed by 0.83 before)."""
    lines = ["The cat sat on the mat.", "A dog ran in the park today.", "We hold these truths to be self-evident."]
    kw = dict(keys=["attention", "norm"], heads=False, gradients=False, erase=False, max_tokens=8)
    whole = faithfulness(minilm, lines, **kw)
    shard = faithfulness(minilm, lines[1:], first_index=1, **kw)
    for key in ("random", "attention", "norm"):
        np.testing.assert_allclose(shard.spearman[key], whole.spearman[key][1:], atol=1e-6)


def test_runner_up_foil_rule_scores_the_logit_difference_to_the_second_candidate(head_model):
    """foil_rule "runner-up": the foil is the unchanged model's second-best token, and knockout, sources and AOPC
    are all on the logit difference (comprehensiveness rerun here on erased ids with the head model)."""
    lm = head_model("llama")
    enc = tiny.encoded(n=8, seed=5)
    hm, i, n = lm.head_model, 7, len(enc.ids)
    with torch.no_grad():
        logits = hm(input_ids=torch.tensor([enc.ids])).logits[0, i].to(torch.float64)
    top2 = torch.topk(logits, 2).indices.tolist()
    t = explain_text(_session(lm, enc), KEYS, gradients=False, baseline_id=3, foil_rule="runner-up")
    assert (t.knockout.token, t.knockout.foil) == (top2[0], top2[1]) and t.measure == "logit difference"
    assert t.total == pytest.approx(float(logits[top2[0]] - logits[top2[1]]), abs=1e-10)
    assert t.gaps["sources"] == pytest.approx(0.0, abs=1e-5)  # Llama RMSNorm computes in float32
    order = sorted([j for j in range(n) if j != i], key=lambda j: -t.attributions["sources"][j])
    comp = []
    for k in (0.1, 0.3, 0.5):
        top = set(order[: max(1, math.ceil(k * (n - 1)))])
        ids = [3 if j in top else tok for j, tok in enumerate(enc.ids)]
        with torch.no_grad():
            comp.append(t.total - float(_score(hm, ids, i, top2[0], top2[1])))
    assert t.aopc["sources"]["comprehensiveness"] == pytest.approx(np.mean(comp), abs=1e-10)
    with pytest.raises(normviz.core.errors.NormvizError, match="foil_rule"):
        explain_text(_session(lm, enc), KEYS, gradients=False, foil_rule="runner-up", foil=top2[1])

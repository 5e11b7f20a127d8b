"""Session behaviour: one forward pass per text, memoised keys, refusals per key, user-registered
architectures, and layer reruns (value zeroing) from the recorded call arguments in padded batches."""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest
import transformers as tf

import normviz
from normviz.core.errors import NotApplicableError, TooCostlyError
from normviz.methods import feedforward, weights
from normviz.models import arch as arch_table

from ..helpers.maps import analysis, count_forward, in_threads, same_up_to_rounding
from ..helpers.tiny import encoded, randomize_weights

FOUR_POST = ["attention", "norm", "attn_res_ln", "ff_res_ln"]
FOUR_PRE = ["attention", "norm", "attn_res_ln", "ff_res"]


def session_of(lm, enc=None, options=None):
    return normviz.Session.from_encoded(lm, [enc or encoded(n=9)], options=options)[0]


def counting(monkeypatch, module):
    """Count calls of a family module's compute (the session looks it up on the module at each call)."""
    calls = []
    real = module.compute

    def compute(inputs, keys, options):
        calls.append(list(keys))
        return real(inputs, keys, options)

    monkeypatch.setattr(module, "compute", compute)
    return calls


# ---------------------------------------------------------------- (a) one forward pass per text
@pytest.mark.parametrize(
    "arch,keys,more",
    [("bert", FOUR_POST, ["norm_layer", "rollout_attention"]), ("llama", FOUR_PRE, ["norm_layer", "rollout_ff_res"])],
)
def test_a_view_of_four_maps_runs_the_forward_pass_once(tiny_model, arch, keys, more):
    lm = tiny_model(arch)
    session = session_of(lm)
    assert session.forward_passes == 0 and session.computed() == []
    with count_forward(lm.model) as calls:
        a = session.get(keys)
        assert calls[0] == 1 and session.forward_passes == 1
        assert a.keys() == keys
        for k in more:  # a family already computed (norm_layer), a rollout of computed maps
            b = session.get([k])
            assert b.keys()[-1] == k  # (after the keys it requires)
        assert calls[0] == 1 and session.forward_passes == 1
        session.get(keys + more)
        assert calls[0] == 1


def test_the_default_view_of_minilm_runs_once(minilm):
    session = normviz.Session(minilm, "The cat sat on the mat because it was tired.")
    assert session.n_tokens == 13 and session.forward_passes == 0
    with count_forward(minilm.model) as calls:
        session.get(FOUR_POST)
        session.get(["norm_layer", "rollout_attention", "alti"])
    assert calls[0] == 1 and session.forward_passes == 1


def test_a_rollout_alone_after_its_map_needs_no_records(tiny_model):
    """A family that reads only other maps never touches the records."""
    lm = tiny_model("bert")
    session = session_of(lm)
    session.get(["attn_res"])
    with count_forward(lm.model) as calls:
        r = session.get(["rollout_attn_res"])
    assert calls[0] == 0
    np.testing.assert_allclose(r["rollout_attn_res"].sum(-1), 1, atol=1e-12)


def test_a_batch_of_sessions_shares_one_forward_pass(minilm):
    texts = ["The cat sat on the mat.", ("Where is the dog?", "In the garden, asleep.")]
    with count_forward(minilm.model) as calls:
        sessions = normviz.Session.batch(minilm, texts)
        got = [s.get(["attention", "norm", "attn_res_ln"]) for s in sessions]
    assert calls[0] == 1 and all(s.forward_passes == 1 for s in sessions)
    assert got[1].text_pair == "In the garden, asleep." and got[1].tokens.count("[SEP]") == 2
    singles = [
        normviz.analyze(minilm, "The cat sat on the mat.", keys=["attention", "norm", "attn_res_ln"]),
        normviz.analyze(
            minilm, "Where is the dog?", "In the garden, asleep.", keys=["attention", "norm", "attn_res_ln"]
        ),
    ]
    for b, s in zip(got, singles):
        assert b.tokens == s.tokens
        for k in s.keys():
            np.testing.assert_allclose(b[k], s[k], rtol=1e-4, atol=1e-6, err_msg=k)
    via_api = normviz.analyze_batch(minilm, texts, keys=["attention"])  # a second pass of the same batch
    same_up_to_rounding(via_api[0]["attention"], got[0]["attention"], what="attention")


# ---------------------------------------------------------------- (b) memoised keys
def test_keys_computed_once_are_not_recomputed(tiny_model, monkeypatch):
    lm = tiny_model("bert")
    ff_calls = counting(monkeypatch, feedforward)
    w_calls = counting(monkeypatch, weights)
    session = session_of(lm)
    first = session.get(["attention", "ff"])
    assert len(ff_calls) == 1 and len(w_calls) == 1
    assert set(ff_calls[0]) == {"ff", "ff_res", "ff_res_ln"}  # the family's stages, computed together
    again = session.get(["ff", "ff_res", "ff_res_ln", "attention"])
    assert len(ff_calls) == 1 and len(w_calls) == 1
    assert again["ff"] is first["ff"] and again["attention"] is first["attention"]  # the memoised arrays
    assert set(session.computed()) >= {"attention", "ff", "ff_res", "ff_res_ln"}


def test_compute_together_off_computes_only_what_is_asked(tiny_model, monkeypatch):
    lm = tiny_model("bert")
    ff_calls = counting(monkeypatch, feedforward)
    session = session_of(lm, options={"compute_together": False})
    session.get(["ff"])
    assert ff_calls == [["ff"]] and "ff_res" not in session.computed()
    session.get(["ff_res", "ff"])
    assert ff_calls == [["ff"], ["ff_res"]]
    together = session_of(lm).get(["ff", "ff_res"])  # another session: another forward pass
    same_up_to_rounding(session.get(["ff_res"])["ff_res"], together["ff_res"], what="ff_res")


def test_a_shared_session_computes_once_under_concurrent_gets(tiny_model, monkeypatch):
    """The app shares one session per text between visitors: concurrent gets record and compute once."""
    lm = tiny_model("bert")
    ff_calls = counting(monkeypatch, feedforward)
    session = session_of(lm)
    results = []
    with count_forward(lm.model) as calls:
        threads = [
            threading.Thread(target=lambda: results.append(session.get(["attention", "ff_res"]))) for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert calls[0] == 1 and len(ff_calls) == 1 and len(results) == 4
    for r in results[1:]:
        np.testing.assert_array_equal(r["ff_res"], results[0]["ff_res"])


def test_concurrent_sessions_of_one_shared_model_do_not_mix(minilm):
    """normviz records with forward hooks on the shared model: sessions of different texts in threads."""
    texts = ["The cat sat on the mat.", "Dogs bark at night, loudly and often."]
    alone = [normviz.analyze(minilm, t, keys=["attention", "norm"])["norm"] for t in texts]
    results = {}

    def run(i):
        results[i] = normviz.Session(minilm, texts[i % 2], max_tokens=64).get(["attention", "norm"])["norm"]

    in_threads(run, 4)
    assert len(results) == 4
    for i, arr in results.items():
        assert np.allclose(arr, alone[i % 2], atol=1e-5)


# ---------------------------------------------------------------- (c) refusals per key
def test_refusals_per_key_while_the_rest_is_computed(tiny_model):
    lm = tiny_model("llama")
    session = session_of(lm, options={"flow_max_tokens": 4})
    assert "flow_max_tokens=4" in session.refusal("flow")
    assert "post-LN" in session.refusal("ff_res_ln") and session.refusal("attention") is None
    assert session.forward_passes == 0  # refusal() runs nothing
    with count_forward(lm.model) as calls:
        a = session.get(["attention", "flow", "ff_res_ln", "rollout_attention"], strict=False)
    assert calls[0] == 1
    assert a.keys() == ["attention", "rollout_attention"]
    assert set(a.refused) == {"flow", "ff_res_ln"}
    assert "flow_max_tokens" in a.refused["flow"] and "post-LN" in a.refused["ff_res_ln"]
    with pytest.raises(normviz.core.errors.UnknownMethodError, match="flow_max_tokens"):
        a["flow"]  # the reason travels with the missing key
    np.testing.assert_allclose(a["rollout_attention"].sum(-1), 1, atol=1e-12)


@pytest.mark.parametrize(
    "keys,error", [(["attention", "flow"], TooCostlyError), (["attention", "ff_res_ln"], NotApplicableError)]
)
def test_strict_raises_before_any_forward_pass(tiny_model, keys, error):
    lm = tiny_model("llama")
    session = session_of(lm, options={"flow_max_tokens": 4})
    with count_forward(lm.model) as calls, pytest.raises(error):
        session.get(keys)
    assert calls[0] == 0 and session.forward_passes == 0 and session.computed() == []


def test_the_feedforward_budget_refuses_before_the_pass(tiny_model):
    lm = tiny_model("bert")
    session = session_of(lm, options={"ff_budget_s": 1e-12})
    assert "ff_budget_s" in session.refusal("ff_res")
    with count_forward(lm.model) as calls, pytest.raises(TooCostlyError, match="Shorten the text"):
        session.get(["attention", "ff_res"])
    assert calls[0] == 0
    a = session.get(["attention", "ff_res", "rollout_ff_res"], strict=False)
    assert a.keys() == ["attention"] and set(a.refused) == {"ff_res", "rollout_ff_res"}
    assert "needs 'ff_res'" in a.refused["rollout_ff_res"]  # a key whose requirement is refused is refused too


# ---------------------------------------------------------------- (e) user-registered architectures
class MyBertConfig(tf.BertConfig):
    model_type = "my-bert"


@pytest.fixture
def restore_architectures():
    saved = (dict(arch_table.ARCHITECTURES), copy.deepcopy(arch_table.FAMILIES))
    yield
    arch_table.ARCHITECTURES.clear()
    arch_table.ARCHITECTURES.update(saved[0])
    arch_table.FAMILIES.clear()
    arch_table.FAMILIES.update(saved[1])


def _bert_pair():
    import torch

    kw = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        vocab_size=97,
    )
    torch.manual_seed(0)
    ref = tf.BertModel(tf.BertConfig(**kw), add_pooling_layer=False).double().eval()
    randomize_weights(ref)
    mine = tf.BertModel(MyBertConfig(**kw), add_pooling_layer=False).double().eval()
    mine.load_state_dict(ref.state_dict())
    for m in (ref, mine):
        m.config._attn_implementation = "eager"
    return ref, mine


def test_register_architecture_adds_a_row_without_editing_the_package(restore_architectures):
    ref, mine = _bert_pair()
    with pytest.warns(UserWarning, match="'my-bert' model, which has no architecture row"):
        assert normviz.from_model(mine, None).spec.family == "floor"  # the raw-attention floor until a row
    spec = normviz.register_architecture("my-bert", arch_table.ARCHITECTURES["bert"], "My BERTs (post-LN)")
    assert "My BERTs (post-LN): my-bert" in arch_table.supported_text()
    lm = normviz.from_model(mine, None, name="mine")
    assert lm.spec is spec and lm.model_type == "my-bert"
    got = analysis(lm, encoded(n=7), ["attention", "attn_res_ln", "ff_res_ln"])
    want = analysis(normviz.from_model(ref, None), encoded(n=7), ["attention", "attn_res_ln", "ff_res_ln"])
    for k in want.keys():
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-14, err_msg=k)


def test_re_registering_a_model_type_is_used(restore_architectures):
    import dataclasses

    ref, _ = _bert_pair()
    spec = dataclasses.replace(arch_table.ARCHITECTURES["bert"], family="my-own-bert")
    normviz.register_architecture("bert", spec)
    lm = normviz.from_model(ref, None)
    assert lm.spec is spec and lm.spec.family == "my-own-bert"
    assert "my-own-bert: bert" in arch_table.supported_text()
    assert "bert" not in arch_table.FAMILIES["BERT family (post-LN)"]
    assert analysis(lm, encoded(n=5), ["attn_res"])["attn_res"].shape == (2, 5, 5)


def test_architecture_table_is_restored():
    """(after the tests above) the built-in table is intact."""
    assert arch_table.ARCHITECTURES["bert"].family == "bert" and "my-bert" not in arch_table.ARCHITECTURES
    assert "bert" in arch_table.FAMILIES["BERT family (post-LN)"]


# ---------------------------------------------------------------- (f) layer reruns from the recorded calls
@pytest.mark.parametrize("arch", ["bert", "gpt2"])
def test_value_zeroing_in_a_padded_batch_reuses_the_recorded_calls(tiny_model, arch):
    lm = tiny_model(arch)
    encs = [encoded(n=5, seed=3), encoded(n=10, seed=4)]
    sessions = normviz.Session.from_encoded(lm, encs)
    with count_forward(lm.model) as calls:
        for s, enc in zip(sessions, encs):
            n = len(enc.ids)
            for view in s.layers():
                args, kwargs = view.rec.call
                assert args == () and kwargs["output_attentions"] is False
                assert "past_key_values" not in kwargs and "use_cache" not in kwargs
                mask = kwargs["attention_mask"]
                assert mask.shape[0] == 1 and mask.shape[-1] == n  # cut to this sequence, padding dropped
        got = [s.get(["value_zeroing"]) for s in sessions]
    assert calls[0] == 1  # the recording pass only: no dummy pass to capture the layer calls
    for g, enc in zip(got, encs):
        single = analysis(lm, enc, ["value_zeroing"])
        np.testing.assert_allclose(g["value_zeroing"], single["value_zeroing"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(g["value_zeroing"].sum(-1), 1, atol=1e-12)


def test_a_norm_module_called_by_another_thread_during_recording_leaves_the_records_alone(tiny_model):
    """The recording hooks sit on shared modules; a map computed in another thread meanwhile may call one of
    them (the FF maps call the norm module on recorded vectors). The recording keeps its own pass's inputs."""
    import threading

    import torch

    from normviz.models.params import get_path

    lm = tiny_model("bert")
    enc = encoded(n=9)
    reference = normviz.Session.from_encoded(lm, [enc])[0].layers()[0].rec.z_attn.clone()
    norm0 = get_path(lm.layers[0], lm.spec.norm_on_attn_residual)
    stray = torch.randn(3, reference.shape[-1], dtype=reference.dtype)

    def other_thread_calls_norm0(module, args, kwargs):  # runs in the recording pass, after layer 0's norm
        t = threading.Thread(target=lambda: norm0(stray))
        t.start()
        t.join()

    handle = lm.layers[1].register_forward_pre_hook(other_thread_calls_norm0, with_kwargs=True)
    try:
        got = normviz.Session.from_encoded(lm, [enc])[0].layers()[0].rec.z_attn
    finally:
        handle.remove()
    # two passes: equal up to GEMM rounding (helpers.maps.PASS_TOL); the stray vector would change it by O(1)
    same_up_to_rounding(got, reference, what="z_attn")

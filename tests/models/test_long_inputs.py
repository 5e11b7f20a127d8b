"""Long inputs (issue 20): q, k records instead of α, Session.map one layer at a time, the memory budget,
half-precision models. Tiny random models; the smollm2 document check is slow."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.core.errors import NormvizError, TooCostlyError
from normviz.session.session import Session

from ..helpers import tiny

SELF_ATTENTION = ("bert", "distilbert", "gpt2", "llama", "mistral", "qwen3")


def _rel(a, b) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


@pytest.mark.parametrize("arch", SELF_ATTENTION)
def test_qk_records_equal_weight_records(tiny_model, arch):
    """Recording q, k and recomputing α per layer gives every default key of the α-recording path (float64,
    a right-padded batch of two: masks, GQA, sliding windows included)."""
    lm = tiny_model(arch)
    enc = [tiny.encoded(11), tiny.encoded(7, seed=3)]
    got = {}
    for mode in ("weights", "qk"):
        sessions = Session.from_encoded(lm, enc, options={"record_attention": mode})
        got[mode] = [s.get(None).arrays for s in sessions]
        rec = sessions[0].records()[0]
        assert (rec.attn is None) == (mode == "qk")
    for b in range(2):
        assert set(got["qk"][b]) == set(got["weights"][b])
        for key, ref in got["weights"][b].items():
            assert _rel(got["qk"][b][key], ref) <= 1e-12, (arch, b, key)


def test_a_padded_sequence_recomputes_the_alpha_of_the_pass_bit_for_bit(tiny_model):
    """Llama's eager softmax is float32 even in a float64 model, and torch's CPU softmax sums a row shorter than
    one SIMD vector (AVX2: 8 float32, AVX-512: 16) in another order than a longer one: a 5-token sequence padded
    to 20 keys crosses that width on either. Its α recomputed from q, k (the padding's keys kept, hidden by the
    mask) is the padded pass's α exactly, and its padding columns are not part of it."""
    lm = tiny_model("llama")
    enc = [tiny.encoded(20, seed=5), tiny.encoded(5, seed=6)]
    weights = Session.from_encoded(lm, enc, options={"record_attention": "weights"})[1].records()
    qk = Session.from_encoded(lm, enc, options={"record_attention": "qk"})[1].records()
    for w, q in zip(weights, qk):
        assert q.attn is None and q.qk.key.shape[2] == 20  # the pass's row length
        got = q.attention()
        assert got.shape == w.attn.shape == (lm.n_heads, 5, 5)
        assert torch.equal(got, w.attn)
        assert [c for _, _, c, _ in q.attention_inputs().blocks()] == [5]


def test_auto_mode_records_qk_only_when_alpha_is_large(tiny_model):
    from normviz.record import recorder as rec_mod

    lm = tiny_model("llama")
    assert not rec_mod.records_qk(lm, 16)
    assert rec_mod.records_qk(lm, 16, mode="qk")
    assert rec_mod.records_qk(lm, 10**5)
    with pytest.raises(ValueError):
        rec_mod.records_qk(lm, 16, mode="sometimes")


@pytest.mark.parametrize("arch", ["llama", "gemma3_text"])
def test_float32_sdpa_recording_is_close_and_complete(tiny_model, monkeypatch, arch):
    """float32 llama and Gemma 3 (sliding windows in the mask, QK-norm): the recording pass runs SDPA (no α kept);
    maps agree with the eager path to float32 rounding, and α's rows still sum to one."""
    from normviz.record import attention_capture

    lm = (
        tiny_model("llama", dtype=torch.float32) if arch == "llama" else tiny.build_with_head(arch, dtype=torch.float32)
    )
    seen, sdpa = [], attention_capture._sdpa

    def counted(*args):
        out = sdpa(*args)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(attention_capture, "_sdpa", counted)
    enc = tiny.encoded(13)
    a = Session.from_encoded(lm, [enc], options={"record_attention": "weights"})[0].get(["attention", "attn_res_ln"])
    b = Session.from_encoded(lm, [enc], options={"record_attention": "qk"})[0].get(["attention", "attn_res_ln"])
    assert seen and all(seen)  # the q, k pass ran SDPA at every layer
    for key in ("attention", "attn_res_ln"):
        assert _rel(b[key], a[key]) < 1e-4
    np.testing.assert_allclose(b["attention"].sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("mode", ["weights", "qk"])
def test_map_equals_the_whole_arrays(tiny_model, mode):
    lm = tiny_model("llama")
    enc = tiny.encoded(10)
    whole = Session.from_encoded(lm, [enc])[0].get(
        ["attention", "norm", "norm_layer", "attn_res", "attn_res_ln", "ff", "ff_res", "rollout_attn_res_ln"]
    )
    s = Session.from_encoded(lm, [enc], options={"record_attention": mode})[0]
    for layer in (0, 1, -1):
        for key in ("attention", "norm"):
            assert _rel(s.map(key, layer, 1), whole.map(key, layer, 1)) <= 1e-12
            assert _rel(s.map(key, layer), whole.map(key, layer)) <= 1e-12
        for key in ("norm_layer", "attn_res", "attn_res_ln", "ff", "ff_res"):
            assert _rel(s.map(key, layer), whole.map(key, layer)) <= 1e-12, (key, layer)
    assert s.computed() == []  # per-layer keys never built a whole array


def test_rollouts_one_product_at_a_time(tiny_model):
    """Session.map of a rollout multiplies one [n, n] layer factor at a time (resuming from a cached R_k);
    the receptive-field normalisation and value zeroing go through get()."""
    lm = tiny_model("gpt2")
    enc = tiny.encoded(10)
    keys = ["rollout_attention", "rollout_attn_res", "rollout_attn_res_ln", "rollout_ff_res"]
    whole = Session.from_encoded(lm, [enc])[0].get(keys)
    s = Session.from_encoded(lm, [enc])[0]
    for key in keys:
        assert _rel(s.map(key, 0), whole.map(key, 0)) <= 1e-12
        assert _rel(s.map(key, 1), whole.map(key, 1)) <= 1e-12, key
    assert s.computed() == []
    rf = Session.from_encoded(lm, [enc], options={"rollout_normalization": "receptive_field"})[0]
    ref = Session.from_encoded(lm, [enc], options={"rollout_normalization": "receptive_field"})[0].get(keys[:1])
    assert _rel(rf.map(keys[0], 1), ref.map(keys[0], 1)) <= 1e-12
    assert "rollout_attention" in rf.computed()


def test_map_is_memoised_within_its_bound(tiny_model, monkeypatch):
    lm = tiny_model("gpt2")
    s = Session.from_encoded(lm, [tiny.encoded(9)], options={"map_cache_mb": 1})[0]
    first = s.map("attn_res_ln", 1)
    calls = []
    from normviz.methods import norms

    real = norms.compute
    monkeypatch.setattr(norms, "compute", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert s.map("attn_res_ln", 1) is first and not calls
    s.map("attn_res_ln", 0)
    assert calls
    assert s.store.layer_maps.nbytes <= 2**20
    tiny_bound = Session.from_encoded(lm, [tiny.encoded(9)], options={"map_cache_mb": 1e-6})[0]
    tiny_bound.map("norm", 0, 0)
    assert len(tiny_bound.store.layer_maps) == 0  # bigger than the bound: returned, not kept


def test_map_ranges_and_records_once(tiny_model):
    lm = tiny_model("bert")
    s = Session.from_encoded(lm, [tiny.encoded(8)])[0]
    with pytest.raises(NormvizError, match="layer 9 is out of range"):
        s.map("norm", 9)
    with pytest.raises(NormvizError, match="head 7 is out of range"):
        s.map("attention", 0, 7)
    s.map("norm", 0)
    s.map("ff_res_ln", 1)
    assert s.forward_passes == 1


def test_get_refuses_over_the_memory_budget_before_running(tiny_model):
    lm = tiny_model("llama")
    s = Session.from_encoded(lm, [tiny.encoded(12)], options={"memory_budget_mb": 0.01})[0]
    with pytest.raises(TooCostlyError, match=r"memory budget.*Session\.map\(key, layer, head\)"):
        s.get(["attention", "norm"])
    assert s.forward_passes == 0
    a = s.get(["attention", "norm", "norm_layer"], strict=False)  # the first that fit are kept
    assert "attention" in a.refused or "norm" in a.refused
    assert s.map("norm", 1, 0).shape == (12, 12)  # one layer still works


@pytest.mark.parametrize("dtype, tol", [(torch.bfloat16, 2e-2), (torch.float16, 2e-3)])
def test_half_precision_model_maps_in_float32(dtype, tol):
    """A tiny llama in bfloat16: records in bf16, maps in float32, close to the float32 model's maps and
    complete (Σ_j parts + bias = the norm's real output) to bf16's precision."""
    import copy

    ref = tiny.build("llama", dtype=torch.float32)
    lm = normviz.from_model(copy.deepcopy(ref.model).to(dtype), None, name=f"tiny-llama-{dtype}")
    assert lm.dtype == dtype
    enc = tiny.encoded(10)
    s = Session.from_encoded(lm, [enc])[0]
    a = s.get(["attention", "attn_res_ln", "ff_res"])
    r = Session.from_encoded(ref, [enc])[0].get(["attention", "attn_res_ln", "ff_res"])
    assert a["attn_res_ln"].dtype == np.float32
    assert s.records()[0].x.dtype == dtype
    for key in ("attention", "attn_res_ln", "ff_res"):
        assert _rel(a[key], r[key]) < 0.1, key
    view = s.layers()[1]
    parts, bias = view.attn_res_ln_vectors(slice(0, view.n))
    real = view.ln_attn.module(view.rec.z_attn)
    assert parts.dtype == torch.float32
    err = (parts.sum(1) + bias - real).abs().max() / real.abs().max()
    assert err < tol  # half records: the real vector itself is rounded to 8 (bf16) or 11 (fp16) bits of mantissa
    assert _rel(s.map("attn_res_ln", 1), a["attn_res_ln"][1]) <= 1e-6


def test_load_parses_half_dtypes():
    from normviz.core.backend import parse_dtype

    cpu = torch.device("cpu")
    assert parse_dtype("bfloat16", cpu) is torch.bfloat16 and parse_dtype("float16", cpu) is torch.float16
    with pytest.raises(NormvizError, match="bfloat16"):
        parse_dtype("int8", cpu)


@pytest.mark.slow
def test_smollm2_long_document_per_layer_maps(smollm2):
    """~4,000 tokens of smollm2: three single-layer maps within 6 GB RSS (model included); each equals, on
    the first 256 tokens, the maps of that 256-token prefix alone; the whole arrays are refused at once."""
    import resource
    import time

    text = " ".join(
        f"Sentence {i} tells how the river {['rose', 'fell', 'turned'][i % 3]} near town {i % 17}." for i in range(400)
    )
    s = Session(smollm2, text, max_tokens=4000, options={"memory_budget_mb": 4096})
    assert s.n_tokens >= 3900
    t0 = time.process_time()  # CPU seconds: under load wall time measures the other processes too
    with pytest.raises(TooCostlyError, match="memory budget"):
        s.get(["attention", "norm"])
    assert time.process_time() - t0 < 5 and s.forward_passes == 0
    import dataclasses

    enc = s.encoded
    cut = dataclasses.replace(
        enc,
        ids=enc.ids[:256],
        tokens=enc.tokens[:256],
        labels=enc.labels[:256],
        special=enc.special[:256],
        token_type_ids=None,
    )
    short = Session.from_encoded(smollm2, [cut])[0]
    for key, layer, head in (("norm", 15, None), ("attn_res_ln", 29, None), ("attention", 3, 4)):
        m = s.map(key, layer, head)
        assert m.shape == (s.n_tokens, s.n_tokens)
        assert _rel(m[:256, :256], short.map(key, layer, head)) <= 1e-4, key
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20 <= 6.0


def _gpu_check():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("normviz_gpu_check", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_check_runs_its_exactness_step_on_the_cpu_and_skips_without_cuda(capsys):
    mod = _gpu_check()
    res = mod.exactness("cpu", archs=("llama", "bert"))
    assert set(res) == {"llama", "bert"} and all(r["ok"] for r in res.values()), res
    if not torch.cuda.is_available():
        assert mod.main(["--device", "cuda"]) == 0
        assert "no CUDA device" in capsys.readouterr().out


@pytest.mark.parametrize("n", [40, 200])
def test_alpha_recomputed_in_row_blocks_equals_the_recorded_alpha(monkeypatch, n):
    """A long input's α is recomputed in blocks of receiving rows (the eager function's temporaries are a
    block's), a causal block over its own past only (keys cut at a multiple of 64): the same numbers as the
    recorded α, bit for bit (float64, blocks of 7 rows; at 200 tokens most blocks are cut)."""
    from normviz.record import attention_capture
    from normviz.session.session import Session
    from tools.tiny import build, encoded

    lm, enc = build("llama"), encoded(n)
    want = Session.from_encoded(lm, [enc], options={"record_attention": "weights"})[0].get(["attention"])
    monkeypatch.setattr(attention_capture, "WEIGHTS_BLOCK_BYTES", 4 * n * 8 * 7)
    cut = []
    seen = attention_capture.AttentionInputs._seen_columns
    monkeypatch.setattr(
        attention_capture.AttentionInputs,
        "_seen_columns",
        lambda self, a, b, m: cut.append(seen(self, a, b, m) < m) or seen(self, a, b, m),
    )
    s = Session.from_encoded(lm, [enc], options={"record_attention": "qk"})[0]
    assert s.records()[0].attn is None  # recomputed from q, k
    np.testing.assert_array_equal(s.get(["attention"])["attention"], want["attention"])
    assert any(cut) == (n > 64), cut


@pytest.mark.parametrize("arch", ["llama", "bert", "gpt2"])
def test_maps_of_one_layer_in_one_pass_equal_the_whole_arrays(arch):
    """Session.maps (one pass over a layer's records for several keys; α's head mean or one head taken from α
    itself) equals the whole arrays of get() to 1e-12 (float64), computes no whole array, and a second call is
    served from the cache."""
    from tools.tiny import build, distinct

    lm, enc = build(arch), distinct(11)
    keys = ["attention", "norm", "attn_res", "attn_res_ln"]
    whole = Session.from_encoded(lm, [enc])[0].get(keys + ["norm_layer"])
    s = Session.from_encoded(lm, [enc])[0]
    for layer in range(lm.n_layers):
        for head in (None, 1):
            got = s.maps(keys, layer, head)
            assert list(got) == keys
            for k, v in got.items():
                np.testing.assert_allclose(v, whole.map(k, layer, head), rtol=0, atol=1e-12, err_msg=(k, layer, head))
            again = s.maps(keys, layer, head)
            assert (
                all(again[k] is got[k] for k in ("attn_res", "attn_res_ln")) and again["attention"] is got["attention"]
            )
    assert s.computed() == []


@pytest.mark.parametrize("arch, n", [("llama", 150), ("qwen3", 150), ("bert", 61)])
def test_a_long_layer_streams_alpha_in_row_blocks_with_the_same_bits(monkeypatch, arch, n):
    """A layer recomputed from q, k is computed with α streamed in blocks of rows (``methods.long_layer``: α's
    head mean and one head, one head of norm, norm_layer, attn_res, attn_res_ln; the pair kernel over a causal
    block's own past): bit for bit the maps of the same layer from its whole α (float64, blocks of 8 rows,
    odd and even counts, diagonal in every block), and the whole α is never built."""
    from normviz.methods import long_layer
    from normviz.record import decompose
    from tools.tiny import build, encoded

    lm, enc = build(arch), encoded(n)
    keys = ["attention", "norm", "attn_res", "attn_res_ln", "norm_layer"]
    ref = Session.from_encoded(lm, [enc], options={"record_attention": "qk"})[0]
    monkeypatch.setattr(long_layer, "streamable", lambda view, wanted: False)
    want = {(layer, head): ref.maps(keys, layer, head) for layer in range(lm.n_layers) for head in (None, 1)}
    monkeypatch.undo()
    monkeypatch.setattr(long_layer, "BLOCK_BYTES", 8 * lm.n_heads * n * 8)
    real = long_layer.layer_maps
    monkeypatch.setattr(long_layer, "layer_maps", lambda v, w, block_bytes=None: real(v, w, long_layer.BLOCK_BYTES))
    whole = []
    monkeypatch.setattr(decompose.LayerDecomposition, "alpha", property(lambda self: whole.append(1)))
    s = Session.from_encoded(lm, [enc], options={"record_attention": "qk"})[0]
    for (layer, head), maps in want.items():
        got = s.maps(keys, layer, head)
        for k in keys:
            np.testing.assert_array_equal(got[k], maps[k], err_msg=(arch, k, layer, head))
    assert whole == []


@pytest.mark.parametrize("arch", SELF_ATTENTION)
def test_a_single_long_sequence_drops_q_and_k_and_reruns_the_layer_for_them(arch, monkeypatch):
    """One sequence recorded with q, k: they are dropped after the pass where they are large (the rerun of the first
    and last layer reproduced them bit for bit) and recomputed from the layer's recorded input when α is needed: α
    equals the α-recording path bit for bit (float64, every layer). A rerun that does not reproduce them keeps them;
    small ones are kept."""
    from normviz.record import recorder as record_mod
    from tools.tiny import build, encoded

    lm, enc = build(arch), encoded(40)
    small = Session.from_encoded(lm, [enc], options={"record_attention": "qk"})[0].records()
    assert all(r.qk.query is not None for r in small)  # below DROP_QK_FROM_BYTES: kept, no rerun per α
    monkeypatch.setattr(record_mod, "DROP_QK_FROM_BYTES", 0)
    recs = Session.from_encoded(lm, [enc], options={"record_attention": "qk"})[0].records()
    want = Session.from_encoded(lm, [enc], options={"record_attention": "weights"})[0].records()
    assert all(r.qk.query is None and r.qk.key is None for r in recs)
    for r, w in zip(recs, want):
        assert r.n_heads == w.attn.shape[0]
        assert torch.equal(r.attention(), w.attn)
    real = record_mod.rerun

    def off_by_rounding(layer, x, call):
        got = real(layer, x, call)
        return got.with_qk(got.query * (1 + 1e-15), got.key)

    monkeypatch.setattr(record_mod, "rerun", off_by_rounding)
    kept = Session.from_encoded(lm, [enc], options={"record_attention": "qk"})[0].records()
    assert all(r.qk.query is not None for r in kept)
    assert torch.equal(kept[-1].attention(), want[-1].attn)


def test_a_long_layer_is_cached_within_the_long_input_bound(monkeypatch):
    """A streamed (long) layer's maps go into at most ``long_map_cache_mb``: the previous layer's are dropped
    before the new one is computed, and a head change keeps (and reuses) its layer's layer-level maps."""
    from tools.tiny import build, encoded

    lm, n = build("llama"), 150
    one_map = n * n * 8
    s = Session.from_encoded(
        lm, [encoded(n)], options={"record_attention": "qk", "long_map_cache_mb": 4.5 * one_map / 2**20}
    )[0]
    keys = ["attention", "norm", "attn_res", "attn_res_ln"]
    s.maps(keys, 0)
    layer = s.maps(keys, 1)
    assert s.store.layer_maps.nbytes == 4 * one_map  # layer 0's four maps dropped first
    head = s.maps(keys, 1, 2)  # one head of attention and norm: the layer mean and norm_layer make room
    assert s.store.layer_maps.nbytes == 4 * one_map
    assert head["attn_res"] is layer["attn_res"] and head["attn_res_ln"] is layer["attn_res_ln"]
    again = s.maps(keys, 1, 2)
    assert all(again[k] is head[k] for k in keys)


@pytest.mark.parametrize("arch", ["llama", "gemma3_text"])
def test_a_long_input_whose_attention_map_is_kept_records_alpha_once(head_model, monkeypatch, arch):
    """Above QK_FROM_BYTES the pass records q, k — unless the ``attention`` map is asked for too (all of α kept
    anyway): α is then written straight into the map's block and the norm family mixes with it (α/s_i where a norm
    follows the attention: Gemma 3), never recomputing α from q, k. Same maps as the q, k pass."""
    from normviz.record import alpha_into, recorder

    lm = head_model(arch)
    enc = tiny.encoded(12, seed=4)
    monkeypatch.setattr(recorder, "QK_FROM_BYTES", 0)
    monkeypatch.setattr(alpha_into, "MIN_BYTES", 0)
    assert recorder.records_qk(lm, 12) and not recorder.records_qk(lm, 12, keep_alpha=True)
    keys = ["attention", "norm", "norm_layer", "attn_res", "attn_res_ln"]
    kept = Session.from_encoded(lm, [enc])[0]
    a = kept.get(keys)
    assert all(c.rec.attn is not None for c in kept.layers(full=False))  # α recorded, not q, k
    qk = Session.from_encoded(lm, [enc])[0]
    b = qk.get(keys[1:])
    assert all(c.rec.attn is None for c in qk.layers(full=False))
    assert kept.forward_passes == qk.forward_passes == 1
    for key in keys[1:]:
        assert _rel(a[key], b[key]) <= 1e-12, key

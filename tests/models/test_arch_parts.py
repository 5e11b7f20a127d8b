"""Issue 38: the later decoders' parts as data (tools/tiny.py LATER_ARCHS: Gemma 1–3, OLMo, OLMo-2, Phi-3,
StarCoder2, Granite, OPT; the parallel blocks of GPT-NeoX, GPT-J, Phi, Cohere; the mixtures of experts Mixtral,
Qwen3-MoE, OLMoE, Qwen2-MoE in float32), each checked against the model's own forward pass on a tiny random float64
model
with its LM head:

- every stage's parts sum to the model's own vector there (attn_res: z = x + P_a(Attn); attn_res_ln: the FF
  block's input; ff: what the FF writes into the residual stream; ff_res: the layer output), and ``norm`` is
  α^h_ij ‖P_i(f^h(x_j))‖ computed here from the value projection's output, W^O and the norm after the attention;
- explain: the direct parts and the sources each sum to the model's own (soft-capped) logit difference, and the
  adjoint sources equal the forward propagation;
- attend: the parts sum to the score, which equals the model's own up to each row's softmax constant (QK-norm:
  q and k norms frozen at their real scales);
- knockout and head ablation equal one brute-force pass per intervention.

Tolerances: ``TOL`` relative; 1e-5 where the model's norms compute in float32 inside a float64 model (Gemma's
(1 + w) RMSNorm, OLMo's LayerNorm, the Llama-family RMSNorm), else 1e-10.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

import normviz
from normviz.attribution import propagate
from normviz.attribution.qk import attend
from normviz.core.errors import NotApplicableError
from normviz.models.params import get_path

from ..helpers import tiny
from ..helpers.maps import all_rows, ff_stage

ARCHS = tiny.LATER_ARCHS
EXACT = (
    "starcoder2",
    "opt",
    "gpt_neox",
    "gptj",
    "phi",
    "falcon",
    "falcon_mq",
    "falcon_seq",
)  # LayerNorm modules in the model's dtype: float64 through
# mixtures of experts run in float32 (transformers' grouped expert matmul has no float64 kernel)
MOE = ("mixtral", "qwen3_moe", "olmoe", "qwen2_moe", "gpt_oss")
TOL = {a: (1e-10 if a in EXACT else 1e-5) for a in ARCHS}
SAME = {a: (1e-6 if a in MOE else 1e-12) for a in ARCHS}  # two passes of the model agree to this
INTERNAL = {a: (1e-5 if a in MOE else 1e-10) for a in ARCHS}  # two routes of normviz's own to one number
# GPT-J computes its attention scores in float32 (q, k upcast): a batched intervention pass rounds differently
INTERVENTION_TOL = {**TOL, "gptj": 1e-7}


@functools.lru_cache(maxsize=None)
def _float32(arch):
    return tiny.build_with_head(arch, dtype=torch.float32)


def _session(lm, enc, options=None):
    return normviz.Session.from_encoded(lm, [enc], options=options)[0]


def _rel(got, want) -> float:
    got, want = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(want, dtype=torch.float64)
    return float((got - want).abs().max() / max(float(want.abs().max()), 1e-300))


@torch.no_grad()
def _own(lm, ids):
    """The model's own vectors per layer, from hooks on its modules: x, out, the FF block's input and output, the
    attention output projection's input and output, the value projection's output, and α."""
    spec, store, handles = lm.spec, {}, []
    for i, layer in enumerate(lm.layers):

        def one(t):  # [1, n, d], or [n, d] where the model flattens its tokens (OPT's FF block)
            return (t[0] if t.ndim == 3 else t).clone()

        def pre(key):
            def fn(m, args, kwargs):
                store[key] = one(kwargs["hidden_states"] if "hidden_states" in kwargs else args[0])

            return fn

        def post(key):
            def fn(m, args, out):
                store[key] = one(out[0] if isinstance(out, tuple) else out)

            return fn

        handles += [
            layer.register_forward_pre_hook(pre((i, "x")), with_kwargs=True),
            layer.register_forward_hook(post((i, "out"))),
            get_path(layer, spec.ff_block if spec.moe else spec.ff_in).register_forward_pre_hook(
                pre((i, "ff_in")), with_kwargs=True
            ),  # experts: the whole block
            get_path(layer, spec.out).register_forward_hook(post((i, "o"))),
            get_path(layer, spec.value).register_forward_hook(post((i, "v"))),
        ]
        if spec.norm_after_ff_out:
            handles.append(get_path(layer, spec.norm_after_ff_out).register_forward_hook(post((i, "ff_write"))))
        else:
            handles.append(
                get_path(layer, spec.ff_block if spec.moe else spec.ff_out).register_forward_hook(post((i, "ff_raw")))
            )
    try:
        out = lm.model(input_ids=torch.tensor([ids]), output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    layers = []
    for i in range(lm.n_layers):
        d = {k: v for (j, k), v in store.items() if j == i}
        if "ff_write" not in d:
            d["ff_write"] = d["ff_raw"] * (getattr(lm.config, spec.ff_out_scale) if spec.ff_out_scale else 1.0)
        d["z"] = d["out"] - d["ff_write"]
        d["attn"] = out.attentions[i][0]
        layers.append(d)
    return layers


@pytest.fixture(scope="module", params=ARCHS)
def setup(request, head_model):
    lm = _float32(request.param) if request.param in MOE else head_model(request.param)
    enc = tiny.encoded(n=9, seed=2)
    return request.param, lm, enc, _own(lm, enc.ids)


def test_stages_sum_to_the_models_own_vectors(setup):
    arch, lm, enc, own = setup
    s = _session(lm, enc, {"chunk_bytes": 4096})
    for ctx, v in zip(s.layers(), own):
        u, b = all_rows(ctx, ctx.attn_res_vectors)
        assert _rel(u.sum(1) + b, v["z"]) <= TOL[arch], (arch, "attn_res")
        parts, bias = all_rows(ctx, ctx.attn_res_ln_vectors)
        assert _rel(parts.sum(1) + bias, v["ff_in"]) <= TOL[arch], (arch, "attn_res_ln")
        parts, bias = ff_stage(ctx, "ff")
        assert _rel(parts.sum(1) + bias, v["ff_write"]) <= TOL[arch], (arch, "ff")
        parts, bias = ff_stage(ctx, "ff_res")
        assert _rel(parts.sum(1) + bias, v["out"]) <= TOL[arch], (arch, "ff_res")
        assert _rel(ctx.alpha, v["attn"]) <= SAME[arch]


def test_norm_is_alpha_times_the_normed_head_vector(setup):
    """norm[l, h, i, j] = α^h_ij ‖P_i(f^h(x_j))‖, P_i(u) = m·γ⊙u/rms(o_i) (m a constant multiplier; P the identity
    where no norm follows the attention), from the model's value output and its raw W^O."""
    arch, lm, enc, own = setup
    s = _session(lm, enc)
    a = s.get(["attention", "norm", "norm_layer", "attn_res", "ff", "ff_res"])
    spec, H = lm.spec, lm.n_heads
    for layer, v in enumerate(own):
        mod = get_path(lm.layers[layer], spec.out)
        w_o = mod.weight.T
        dh = w_o.shape[0] // H
        vals = v["v"]
        if spec.qkv_layout == "per_head_qkv":  # q_h | k_h | v_h per head
            vals = vals.view(vals.shape[0], H, 3, dh)[:, :, 2].reshape(vals.shape[0], H * dh)
        if spec.qkv_layout == "fused_qkv":
            kv = (vals.shape[1] - H * dh) // (2 * dh)
            vals = vals[:, (H + kv) * dh :]
        if spec.qkv_layout == "grouped_qkv":  # per KV group: its query heads, k, v (Falcon's new layout)
            kv = vals.shape[1] // dh - H - (vals.shape[1] // dh - H) // 2
            vals = vals.view(vals.shape[0], kv, -1, dh)[:, :, -1].reshape(vals.shape[0], kv * dh)
        kv = vals.shape[1] // dh
        vals = vals.reshape(-1, kv, dh).transpose(0, 1).repeat_interleave(H // kv, 0)
        f = torch.stack([vals[h] @ w_o[h * dh : (h + 1) * dh] for h in range(H)])  # [H, n, d]
        scale = torch.ones(vals.shape[1], dtype=w_o.dtype)
        if spec.attn_out_scale:
            f = f * getattr(lm.config, spec.attn_out_scale)
        if spec.norm_after_attn_out:
            pn = get_path(lm.layers[layer], spec.norm_after_attn_out)
            f = f * (pn.weight + spec.norm.offset)
            o = v["o"]
            eps = pn.eps if hasattr(pn, "eps") else pn.variance_epsilon
            scale = 1.0 / torch.sqrt(o.pow(2).mean(-1) + eps)
        want = v["attn"] * scale[None, :, None] * f.norm(dim=-1)[:, None, :]
        assert _rel(a["norm"][layer], want) <= TOL[arch], arch
    for key in ("norm", "norm_layer", "attn_res", "ff", "ff_res"):
        assert np.all(np.triu(a[key][..., :, :], 1) == 0), key  # causal: nothing from later tokens


def test_explain_parts_and_sources_sum_to_the_models_logit(setup):
    arch, lm, enc, own = setup
    i = 6
    s = _session(lm, enc)
    with torch.no_grad():
        real = lm.head_model(input_ids=torch.tensor([enc.ids])).logits[0, i].to(torch.float64)
    for foil in (None, 11):
        e = s.explain(foil=foil, position=i)
        total = float(real[e.token] - (real[foil] if foil is not None else 0.0))
        assert abs(e.total - total) <= SAME[arch] * max(1.0, abs(total))
        direct = e.heads.sum() + e.attn_bias.sum() + e.ff.sum() + e.embedding + e.final_bias
        assert abs(direct - total) <= TOL[arch] * max(1.0, abs(total)), (arch, direct, total)
        assert abs(e.sources.sum() + e.bias - total) <= TOL[arch] * max(1.0, abs(total)), (arch, foil)
        assert np.abs(e.sources[i + 1 :]).max() == 0


def test_adjoint_sources_equal_the_forward_propagation(setup):
    arch, lm, enc, own = setup
    i = 5
    s = _session(lm, enc)
    e = s.explain(foil=7, position=i)
    from normviz.attribution import readout_of, target

    readout = readout_of(lm)
    views = s.layers()
    t = target(lm, readout, views, e.token, 7, i)
    parts = propagate.output_parts(s.layers())
    src, bias = propagate.source_logits(parts[i], readout, t.x_last, t.u, t.b)
    scale = max(1.0, float(np.abs(e.sources).max()))
    assert np.abs(e.sources - src.numpy()).max() <= INTERNAL[arch] * scale, arch
    assert abs(e.bias - bias) <= INTERNAL[arch] * scale


def test_attend_sums_to_the_score_up_to_the_row_constant(setup):
    arch, lm, enc, own = setup
    s = _session(lm, enc)
    call = s.layers()[0].rec.call[1]
    if any(isinstance(call.get(name), torch.Tensor) for name, _ in lm.spec.attend_refuse_call):
        with pytest.raises(NotApplicableError, match="ALiBi"):  # Falcon-RW: a bias outside q·k, refused, said why
            attend(s, 0, 0, query=3, key=1)
        return
    # Falcon's inline softmax runs in the model's dtype (float64); the interface's eager ones in float32
    alpha_tol = 1e-10 if lm.spec.attention_call == "inline" else 1e-5
    i = 7
    for layer in range(lm.n_layers):
        alpha = own[layer]["attn"]
        for head in (0, lm.n_heads - 1):
            got = [attend(s, layer, head, query=i, key=j, by_token=j == i) for j in range(i + 1)]
            scores = np.array([a.total for a in got])
            scale = max(1.0, np.abs(scores).max())
            for a in got:
                assert abs(a.by_component.sum() - a.total) <= INTERNAL[arch] * scale
                assert abs(a.model_score - a.total) <= TOL[arch] * scale, (arch, a.model_score, a.total)
            assert abs(got[-1].by_token_full.sum() - got[-1].total) <= TOL[arch] * scale
            live = alpha[head, i, : i + 1].numpy() > 0  # a sliding window's masked keys have α = 0
            if lm.config.__dict__.get("attn_logit_softcapping"):
                continue  # α reads c·tanh(s/c): the raw score's row constant is checked through the cap below
            shift = np.log(alpha[head, i, : i + 1].numpy()[live]) - scores[live]
            assert np.ptp(shift) <= alpha_tol * scale, arch  # α from a float32 softmax (even in float64)


def test_soft_capped_attention_scores_give_alpha(head_model):
    """Gemma 2: α = softmax(c·tanh(s/c)) of attend's score s (soft-capping recorded inside α)."""
    lm = head_model("gemma2")
    enc = tiny.encoded(n=9, seed=2)
    s = _session(lm, enc)
    cap = lm.config.attn_logit_softcapping
    i, layer, head = 3, 0, 1
    scores = np.array([attend(s, layer, head, query=i, key=j).total for j in range(i + 1)])
    capped = cap * np.tanh(scores / cap)
    alpha = s.layers()[layer].alpha[head, i, : i + 1].numpy()
    assert np.ptp(np.log(alpha) - capped) <= 1e-5


def _score(logits, token, foil):
    return float(logits[token] - (logits[foil] if foil is not None else 0.0))


def test_knockout_and_head_ablation_equal_brute_force(setup):
    arch, lm, enc, own = setup
    hm, ids, i = lm.head_model, enc.ids, 6
    n = len(ids)
    s = _session(lm, enc, {"intervention_batch_tokens": 3 * n})
    k = s.knockout(token=5, foil=11, position=i)

    def logits(**kw):
        with torch.no_grad():
            return hm(input_ids=torch.tensor([ids]), **kw).logits[0, i].to(torch.float64)

    total = _score(logits(), 5, 11)
    ref = []
    attn_path = lm.spec.out.rsplit(".", 1)[0]  # the attention module holding W^O
    for j in range(n):

        def cut(module, args, kwargs, j=j):  # each layer's own mask (sliding windows kept), edges (r ≠ j, j) cut
            mask = kwargs.get("attention_mask")
            if mask is None:
                mask = torch.triu(torch.full((n, n), float("-inf"), dtype=torch.float64), diagonal=1)[None, None]
            mask = mask.clone()
            mask[..., torch.arange(n) != j, j] = float("-inf")
            return args, {**kwargs, "attention_mask": mask}

        handles = [get_path(layer, attn_path).register_forward_pre_hook(cut, with_kwargs=True) for layer in lm.layers]
        try:
            ref.append(total - _score(logits(), 5, 11))
        finally:
            for h in handles:
                h.remove()
    assert np.abs(k.delta - np.array(ref)).max() <= INTERVENTION_TOL[arch] * max(1.0, abs(total)), arch
    assert np.abs(ref).max() > 1e-3
    a = s.ablate_heads(token=5, foil=11, position=i)
    H = lm.n_heads
    out = np.empty((lm.n_layers, H))
    for li, layer in enumerate(lm.layers):
        wo = get_path(layer, lm.spec.out)
        dh = (wo.weight.shape[1]) // H
        for h in range(H):

            def pre(module, args, h=h):
                x = args[0].clone()
                x[..., h * dh : (h + 1) * dh] = 0.0
                return (x,) + tuple(args[1:])

            handle = wo.register_forward_pre_hook(pre)
            try:
                out[li, h] = total - _score(logits(), 5, 11)
            finally:
                handle.remove()
    assert np.abs(a.delta - out).max() <= INTERVENTION_TOL[arch] * max(1.0, abs(total)), arch
    assert np.abs(out).max() > 1e-3


def test_graph_edges_are_complete_and_tokens_are_the_sources(setup):
    """The attribution graph (and its Neuronpedia export) on each row: incoming and outgoing edges sum to each
    node's value, the token nodes are explain's sources, the logit node the model's own logit difference."""
    from normviz.attribution.graph import graph

    arch, lm, enc, own = setup
    s = _session(lm, enc)
    g = graph(s, foil=11, position=6)
    e = s.explain(token=g.token, foil=11, position=6)
    n, N = len(s.tokens), g.n_nodes
    A, v = g.adjacency, g.values
    scale = max(1.0, np.abs(v).max())
    comps = slice(n, N - 2)
    assert np.abs(A[comps].sum(1) - v[comps]).max() <= INTERNAL[arch] * scale, arch
    assert np.abs(A[:, :-1].sum(0) - v[:-1]).max() <= INTERNAL[arch] * scale, arch
    assert np.abs(v[:n] - e.sources).max() <= INTERNAL[arch] * scale, arch
    assert abs(v[-1] - e.total) <= TOL[arch] * max(1.0, abs(e.total)), arch
    assert g.to_neuronpedia()["nodes"]


def test_every_key_computes_and_the_lens_reads_the_head(setup):
    """Every key the row offers computes (none refused, all finite), and the logit lens's last row is the
    model's own log-probabilities (Gemma 2's final soft-cap included)."""
    arch, lm, enc, own = setup
    s = _session(lm, enc)
    keys = normviz.all_keys(lm)
    a = s.get(keys)
    assert sorted(a.keys()) == sorted(keys)
    for key in keys:
        assert np.isfinite(a[key]).all(), (arch, key)
    lens = s.logit_lens(position=6)
    with torch.no_grad():
        real = torch.log_softmax(lm.head_model(input_ids=torch.tensor([enc.ids])).logits[0, 6].double(), -1)
    assert np.abs(np.asarray(lens[-1]) - real.numpy()).max() <= 1e-4, arch


ATTENTION_KEYS = ["attention", "norm", "norm_layer", "attn_res", "attn_res_ln"]


def test_a_pass_stopped_after_the_attention_gives_the_full_pass_maps(setup):
    """The attention-only keys (RECORD = "attention": the pass stops before the last layer's FF block,
    tests/models/test_stop_early.py for the older rows) equal a full pass's on each later row; a row whose attention
    runs inline (Falcon: α not seen through the interface) records the full pass instead, with the same maps."""
    arch, lm, enc, own = setup
    early = _session(lm, enc)
    a = early.get(ATTENTION_KEYS)
    last = early.layers(full=False)[-1].rec
    assert (last.out is None) == (lm.spec.attention_call == "interface"), arch
    assert last.z_attn is not None and early.forward_passes == 1
    b = _session(lm, enc, {"stop_early": False}).get(ATTENTION_KEYS)
    for key in ATTENTION_KEYS:
        assert _rel(a[key], b[key]) <= SAME[arch], (arch, key)


def test_alpha_written_into_one_block_is_the_models_own(setup, monkeypatch):
    """α recorded straight into the pooled block (:mod:`normviz.record.alpha_into`) or as the model's own tensors:
    the same records, and the model's own α (sinks, sliding windows, soft-caps, ALiBi inside it)."""
    from normviz.core.tokens import pad_batch
    from normviz.record import alpha_into
    from normviz.record.recorder import record

    arch, lm, enc, own = setup
    ids, mask = pad_batch([enc])
    got = {}
    for into in (True, False):
        monkeypatch.setattr(alpha_into, "MIN_BYTES", 0 if into else 1 << 60)
        got[into] = record(lm, ids, mask)[0]
    for ra, rb, v in zip(got[True], got[False], own):
        for name in ("x", "attn", "z_attn", "out", "v"):
            assert _rel(getattr(ra, name), getattr(rb, name)) <= SAME[arch], (arch, name)
        assert _rel(ra.attn, v["attn"]) <= SAME[arch], arch


def test_the_ff_split_by_expert(setup):
    """Mixtures of experts: each routed expert's output vector (normviz.attribution.direct.expert_outputs) equals the
    model's own experts module run with only that expert's router weight kept; the experts (a shared one last) sum
    to the FF block's output; explain's ff_by_expert rows sum to ff. Dense rows refuse ff_by_expert."""
    from normviz.attribution.direct import expert_outputs

    arch, lm, enc, own = setup
    s = _session(lm, enc)
    e = s.explain(foil=11, position=6)
    if lm.spec.moe is None:
        with pytest.raises(NotApplicableError, match="mixtures of experts"):
            e.ff_by_expert
        return
    assert np.abs(e.ff_by_expert.sum(1) - e.ff).max() <= 1e-5 * max(1.0, np.abs(e.ff).max()), arch
    got = {}

    def grab(module, args, kwargs):
        names = ("hidden_states", "top_k_index", "top_k_weights")
        got.update({**dict(zip(names, args)), **kwargs})

    for layer, ctx in enumerate(s.layers()):
        experts = get_path(lm.layers[layer], lm.spec.moe.experts)
        handle = experts.register_forward_pre_hook(grab, with_kwargs=True)
        try:
            with torch.no_grad():
                lm.model(input_ids=torch.tensor([enc.ids]))
        finally:
            handle.remove()
        hs, idx, w = (got.get(k) for k in ("hidden_states", "top_k_index", "top_k_weights"))
        if idx is None:
            idx, w = got["router_indices"], got["routing_weights"]
        split = expert_outputs(ctx, 6)
        assert _rel(split.sum(0), own[layer]["ff_write"][6]) <= TOL[arch], arch
        for ex in range(experts.num_experts):
            with torch.no_grad():
                want = experts(hs, idx, torch.where(idx == ex, w, torch.zeros_like(w)))[6]
            assert (split[ex] - want).abs().max() <= TOL[arch] * max(1.0, float(own[layer]["ff_write"][6].abs().max()))
        assert (split[: experts.num_experts].abs().sum(1) > 0).sum() == lm.config.num_experts_per_tok

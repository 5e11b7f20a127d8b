"""normviz.show (the notebook API), ‖f(x_j)‖ from a Session (exact against the model's own modules) and the
standalone HTML (offline, every panel's numbers recoverable)."""

import base64
import json
import re

import numpy as np
import pytest
import torch

import normviz
from normviz import viz
from normviz.core.errors import NormvizError
from normviz.core.fx import norms_from_maps
from normviz.viz.notebook import pair_boundary

from ..helpers.tiny import encoded


@pytest.fixture(scope="module")
def tiny_sessions(tiny_model):
    out = {}
    for arch in ("bert", "llama"):
        lm = tiny_model(arch)
        out[arch] = normviz.Session.from_encoded(lm, [encoded(n=7, seed=3)])[0]
    return out


def _own_fx(lm, ids, layer):
    """‖f^h(x_j)‖ from the Hugging Face modules themselves: hidden state in, value and output projections."""
    model = lm.model
    with torch.no_grad():
        hs = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[layer][0]
        if lm.model_type == "bert":
            blk = model.encoder.layer[layer].attention
            v, w_o = blk.self.value(hs), blk.output.dense.weight
        else:  # llama: pre-RMSNorm, GQA
            blk = model.layers[layer]
            v, w_o = blk.self_attn.v_proj(blk.input_layernorm(hs)), blk.self_attn.o_proj.weight
        H = model.config.num_attention_heads
        dh = model.config.hidden_size // H
        kv = v.shape[-1] // dh
        v = v.reshape(len(ids), kv, dh).repeat_interleave(H // kv, dim=1)  # [n, H, dh]
        f = torch.einsum("nhd,ehd->hne", v, w_o.reshape(-1, H, dh))  # [H, n, d]
    return torch.linalg.vector_norm(f, dim=-1).numpy()


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_transformed_norms_are_the_models_own(tiny_sessions, arch):
    s = tiny_sessions[arch]
    full = normviz.transformed_norms(s)
    assert full.shape == (s.lm.n_layers, s.lm.n_heads, s.n_tokens)
    for layer in range(s.lm.n_layers):
        own = _own_fx(s.lm, s.encoded.ids, layer)
        assert np.abs(full[layer] - own).max() <= 1e-9 * np.abs(own).max()
    assert np.array_equal(normviz.transformed_norms(s, 1, 2), full[1, 2])
    a = s.get(["attention", "norm"])
    assert np.allclose(norms_from_maps(a["attention"], a["norm"]), full, rtol=1e-9, atol=0)
    with pytest.raises(NormvizError):
        normviz.transformed_norms(s, 9)


def test_show_returns_one_figure_per_map_with_the_analysis_numbers(tiny_sessions):
    a = tiny_sessions["llama"].get(["attention", "norm", "attn_res"])
    figs = normviz.show(a, ["attention", "norm", "attn_res"], layer=1, head=None)
    assert len(figs) == 3 and all(isinstance(f, type(figs[0])) for f in figs)
    for f, k in zip(figs, ["attention", "norm", "attn_res"]):
        z = np.asarray(f.data[0].z, dtype=float)
        assert np.allclose(np.nan_to_num(z), np.tril(a.map(k, 1)))  # causal: the upper triangle is masked
        assert np.isnan(z[0, 1])
    assert len(normviz.show(a, layer=0)) == 3  # default: every computed map
    with_strip = normviz.show(a, ["attention", "norm"], layer=1, head=2, strip=True)
    assert len(with_strip) == 3 and with_strip[2].layout.meta["normviz"] == "fx_strip"
    assert np.allclose(with_strip[2].data[0].y, normviz.transformed_norms(tiny_sessions["llama"], 1, 2))
    lines = normviz.show(a, "norm", layer=0, head=1, view="lines", threshold=0.3)
    assert len(lines) == 1 and lines[0].layout.meta["normviz"] == "lines"
    assert np.allclose(lines[0].layout.meta["matrix"], a.map("norm", 0, 1))
    player = normviz.show(a, "norm", head=1, view="player")[0]
    assert len(player.frames) == a.n_layers
    share = normviz.show(a, "attn_res", layer=1, values="share")[0]
    assert np.allclose(np.nansum(np.asarray(share.data[0].z, dtype=float), 1), 1)
    with pytest.raises(NormvizError):
        normviz.show(a, "norm", view="pie")


def test_pair_boundary_of_an_encoder_pair():
    class A:  # the two fields pair_boundary reads
        text_pair = "b"
        special = np.array([1, 0, 0, 1, 0, 1], bool)

    assert pair_boundary(A) == 4
    A.text_pair = None
    assert pair_boundary(A) is None


def _decode(v):
    """plotly's JSON keeps numpy arrays as {"dtype", "bdata", "shape"}."""
    if isinstance(v, dict) and "bdata" in v:
        arr = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return arr.reshape([int(x) for x in str(v.get("shape", len(arr))).split(",")])
    return np.asarray(v, dtype=float)


def test_standalone_html_is_offline_and_holds_every_panels_numbers(tiny_sessions):
    a = tiny_sessions["bert"].get(["attention", "norm"])
    figs = normviz.show(a, ["attention", "norm"], layer=1) + normviz.show(a, "norm", layer=1, head=0, view="lines")
    page = viz.standalone_html(figs, title="<b>t</b> & co")
    assert not re.search(r"<script[^>]+src\s*=", page, re.I)  # plotly.js inline, nothing fetched
    assert "<b>t</b>" not in page and "&lt;b&gt;t&lt;/b&gt; &amp; co" in page  # the title is text
    assert page.count("Plotly.newPlot(") == 3
    data = json.loads(re.search(r'id="normviz-data">(.*?)</script>', page, re.S).group(1))
    want = [a.map("attention", 1), a.map("norm", 1), a.map("norm", 1, 0)]
    assert [p["kind"] for p in data["panels"]] == ["heatmap", "heatmap", "lines"]
    for p, w in zip(data["panels"], want):
        assert np.allclose(np.asarray(p["values"], dtype=float), w)
    # and plotly's own JSON, which draws the panels, carries the same z
    for k in range(2):
        call = re.search(r'Plotly\.newPlot\(\s*"nv-panel-%d",\s*(\[.*?\])\s*,\s*\{' % k, page, re.S).group(1)
        z = _decode(json.loads(call)[0]["z"])
        assert np.allclose(z, want[k])


def test_plotly_config_downloads_svg_when_asked():
    cfg = viz.plotly_config("normviz_norm", fmt="svg")
    assert cfg["toImageButtonOptions"] == {"format": "svg", "filename": "normviz_norm", "scale": 2}
    with pytest.raises(ValueError):
        viz.plotly_config(fmt="gif")

"""Issue 19 on the embedded models (float32): smollm2's prediction of "The capital of France is", both
identities to 1e-4 relative, the lens's last row = the model's own log-probabilities; minilm has no LM head."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.core.errors import NormvizError


def test_smollm2_paris(smollm2):
    s = normviz.Session(smollm2, "The capital of France is")
    top = s.predict(top=5)
    assert top[0].token == " Paris" and top[0].prob > 0.5
    e = s.explain(token=" Paris", foil=" London")
    london = next(c for c in s.predict(top=50) if c.token == " London")
    assert abs(e.total - (top[0].logit - london.logit)) <= 1e-5 * abs(e.total)
    direct = e.embedding + e.heads.sum() + e.attn_bias.sum() + e.ff.sum() + e.final_bias
    assert abs(direct - e.total) <= 1e-4 * abs(e.total)
    assert abs(e.sources.sum() + e.bias - e.total) <= 1e-4 * abs(e.total)
    assert e.heads.shape == (30, 9, 5) and e.bias == 0.0  # no biases, RMSNorm without β
    assert s.tokens[int(np.argmax(e.sources))] == "ĠFrance"  # what carries the answer
    # the README's worked example (issue 29: it skipped layer 29 head 0): the head × source cells by size
    biggest = [np.unravel_index(k, e.heads.shape) for k in np.argsort(-np.abs(e.heads).ravel())[:4]]
    assert [(int(l), int(h), s.tokens[j]) for l, h, j in biggest] == [
        (23, 4, "ĠFrance"),
        (29, 0, "Ġis"),
        (29, 1, "Ġis"),
        (23, 3, "ĠFrance"),
    ]
    np.testing.assert_allclose([e.heads[b] for b in biggest], [2.67, -0.99, 0.94, -0.86], atol=0.01)
    # … and the page and the README say the same, in that order, with the numbers of this run
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "attribution.md").read_text(encoding="utf-8")
    named = ["layer 23 head 4", "layer 29 head 0", "layer 29 head 1", "layer 23 head 3"]
    at = [doc.find(x) for x in named]
    assert -1 not in at and at == sorted(at), dict(zip(named, at))
    for value in ("2.67", "−0.99", "0.94", "−0.86"):
        assert value in doc, value
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert f"prob={top[0].prob:.3f}" in readme and f"logit={top[0].logit:.2f}" in readme and f"{e.total:.3f}" in readme
    lens = s.logit_lens()
    with torch.no_grad():
        real = smollm2.head_model(input_ids=torch.tensor([s.encoded.ids])).logits[0, -1].double()
    assert lens.shape == (31, real.shape[0])
    assert np.abs(lens[-1] - torch.log_softmax(real, -1).numpy()).max() < 1e-4
    assert int(lens[-1].argmax()) == top[0].id
    assert s.forward_passes == 1


def test_minilm_has_no_head(minilm):
    assert minilm.head_model is None
    s = normviz.Session(minilm, "The cat sat.")
    with pytest.raises(NormvizError, match="smollm2"):
        s.predict()
    with pytest.raises(NormvizError, match="smollm2"):
        s.explain()

"""``python -m normviz export … --html FILE``: the page opens offline and holds the exported numbers."""

import json
import re

import numpy as np

from normviz import cli


def test_export_html_writes_an_offline_page_with_the_npz_numbers(tiny_bert_dir, tmp_path, capsys):
    out, page = tmp_path / "m.npz", tmp_path / "view"
    rc = cli.main(
        [
            "export",
            "--model",
            str(tiny_bert_dir),
            "--text",
            "the cat sat on the mat",
            "--text-pair",
            "it was warm",
            "--maps",
            "attention",
            "norm",
            "norm_layer",
            "attn_res",
            "--out",
            str(out),
            "--html",
            str(page),
            "--dtype",
            "float64",
            "--html-layer",
            "1",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    html = (tmp_path / "view.html").read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src\s*=", html, re.I)
    assert not re.search(r"<(link|img|iframe)[^>]+(src|href)\s*=\s*[\"']?https?:", html, re.I)
    npz = np.load(out)
    panels = json.loads(re.search(r'id="normviz-data">(.*?)</script>', html, re.S).group(1))["panels"]
    titles = [p["title"] for p in panels]
    # norm's all-heads view is norm_layer: shown once; the ‖f‖ strip and attention − norm follow
    assert [p["kind"] for p in panels] == ["heatmap", "heatmap", "fx_strip", "heatmap", "heatmap"], titles
    assert np.allclose(panels[0]["values"], npz["attention"][1].mean(0))
    assert np.allclose(panels[1]["values"], npz["norm_layer"][1])
    assert np.allclose(panels[3]["values"], npz["attn_res"][1])
    diff = np.array(panels[4]["values"], dtype=float)
    rn = lambda m: m / np.abs(m).sum(1, keepdims=True)  # noqa: E731
    assert np.allclose(diff, rn(npz["attention"][1].mean(0)) - rn(npz["norm_layer"][1]))  # all heads: norm_layer
    assert "the cat sat on the mat" in html


def test_an_unwritable_html_path_is_refused_before_the_model_loads(tmp_path, capsys):
    rc = cli.main(
        [
            "export",
            "--model",
            "minilm",
            "--text",
            "x",
            "--out",
            str(tmp_path / "m.npz"),
            "--html",
            str(tmp_path / "missing" / "v.html"),
        ]
    )
    assert rc == 2 and "--html" in capsys.readouterr().err

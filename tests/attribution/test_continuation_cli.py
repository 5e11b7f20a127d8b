"""``normviz explain --continue T [--continuation TEXT] [--foil runner-up] --out F.npz|F.json [--html F.html]``:
mistakes refused on one line before the model loads; the files hold the library's numbers; the page opens
offline (plotly embedded, the numbers in its data block)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import normviz
from normviz import cli

TEXT = "the cat sat on the mat"


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--continue", "0"], "from 1 to 512"),
        (["--continue", "3", "--continuation", " a"], "use one of them"),
        (["--continuation", ""], "is empty"),
        (["--continue", "3", "--token", " a"], "--token explains one position"),
        (["--continue", "3", "--position", "2"], "--position"),
        (["--html", "x.html"], "give --continue"),
        (["--continue", "3", "--html", "x.txt"], "name a .html"),
        (["--continue", "3", "--html", "/no/such/folder/x.html"], "--html"),
    ],
)
def test_continuation_mistakes_before_the_model_loads(no_load, tmp_path, capsys, extra, says):  # noqa: F811
    argv = ["explain", "--model", "smollm2", "--text", TEXT, "--out", str(tmp_path / "c.npz")] + extra
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error:") and says in err, err


def test_continue_writes_npz_json_and_an_offline_page(llama_lm_dir, tmp_path, capsys):  # noqa: F811
    npz, js, page = tmp_path / "c.npz", tmp_path / "c.json", tmp_path / "c.html"
    assert (
        cli.main(
            [
                "explain",
                "--model",
                str(llama_lm_dir),
                "--text",
                TEXT,
                "--continue",
                "5",
                "--foil",
                "runner-up",
                "--dtype",
                "float64",
                "--out",
                str(npz),
                "--html",
                str(page),
            ]
        )
        == 0
    )
    lm = normviz.load(str(llama_lm_dir), dtype="float64", device="cpu")
    c = normviz.Session(lm, TEXT).explain_continuation(5, foil="runner-up")
    d = np.load(npz)
    assert d["generated_ids"].tolist() == c.generated_ids.tolist() and str(d["foil_mode"]) == "runner-up"
    assert np.array_equal(d["sources"], c.sources, equal_nan=True) and d["heads"].shape == c.heads.shape
    assert np.allclose(np.nansum(d["sources"], 1) + d["bias"], d["totals"], rtol=2e-6, atol=0)
    html = page.read_text(encoding="utf-8")
    assert "https://" not in html.split('<script type="text/javascript">', 2)[1][:200]  # plotly inline
    assert "Plotly" in html and "normviz-data" in html and len(html) > 1_000_000
    data = json.loads(html.split('id="normviz-data">', 1)[1].split("</script>", 1)[0])
    heat = data["panels"][0]
    assert heat["kind"] == "continuation" and len(heat["values"]) == len(c)
    assert heat["values"][0][-1] is None  # the first step cannot read the later tokens
    assert abs(heat["values"][-1][0] - c.sources[-1, 0]) <= 1e-12 * abs(c.sources[-1, 0])
    assert (
        cli.main(
            [
                "explain",
                "--model",
                str(llama_lm_dir),
                "--text",
                TEXT,
                "--continuation",
                " the dog sat",
                "--out",
                str(js),
            ]
        )
        == 0
    )
    j = json.loads(js.read_text())
    assert j["mode"] == "given" and j["text"].strip() == "the dog sat" and j["sources"][0][-1] is None
    assert "wrote" in capsys.readouterr().err

"""AppTest runs of the Translate page with the embedded toy-mt model."""

from __future__ import annotations

from pathlib import Path

from normviz.ui.views.translate import TranslateView

from ..helpers.app import app, figures, heatmaps, no_exception, texts, title, z

PAGE = "app_pages/4_Translate.py"
DATA = Path(__file__).resolve().parents[2] / "assets" / "toy_mt" / "data"


def _alignment(at):
    return [f for f in figures(at) if f["data"] and f["data"][0]["type"] == "scatter"]


def test_translate_generates_the_target_and_shows_weights_vs_norms():
    at = app(PAGE)
    at.run()
    no_exception(at)
    assert at.slider(key="tr_layer").value == 2  # the last layer by default
    assert any(t.startswith("Generated translation:") for t in texts(at.info))
    hms = heatmaps(at)
    assert len(hms) == 2
    assert title(hms[0]).startswith("Cross-attention weights") and title(hms[1]).startswith("Norms")
    assert z(hms[0]).shape == z(hms[1]).shape
    assert abs(z(hms[0]).sum(axis=1) - 1).max() < 1e-5  # weights (mean over heads): each row sums to 1
    assert len(_alignment(at)) == 1


def test_translate_example_with_gold_shows_aer():
    at = app(PAGE)
    at.run()
    at.selectbox(key="tr_example").set_value(0).run()
    no_exception(at)
    src, tgt, gold = (
        (DATA / "test.src").read_text().splitlines()[0],
        (DATA / "test.tgt").read_text().splitlines()[0],
        (DATA / "test.align").read_text().splitlines()[0],
    )
    assert at.text_input(key="tr_src").value == src and at.text_input(key="tr_tgt").value == tgt
    assert at.text_area(key="tr_gold").value == gold
    labels = [m.label for m in at.metric]
    assert len(labels) == 2 and all("AER" in lab for lab in labels)
    assert all(m.value.endswith("%") for m in at.metric)
    assert len(at.dataframe) == 1
    # rows = target tokens: the decoder start token then the target words
    assert len(z(heatmaps(at)[0])) == len(tgt.split()) + 1
    names = {d.get("name") for d in _alignment(at)[0]["data"]}
    assert "predicted, sure gold" in names


def test_translate_restores_from_the_url_and_keeps_it():
    q = {
        "src": "the cat sees a dog",
        "tgt": "mao vidas un inu",
        "layer": "1",
        "head": "2",
        "method": "weight",
        "setting": "AWI",
    }
    at = app(PAGE, query=q)
    at.run()
    no_exception(at)
    assert at.slider(key="tr_layer").value == 1 and at.selectbox(key="tr_head").value == 2
    assert at.radio(key="tr_method").value == "weight" and at.radio(key="tr_setting").value == "AWI"
    assert "layer 1, head 2" in title(heatmaps(at)[0])
    assert {k: at.query_params[k] for k in q} == {
        k: [v] if isinstance(at.query_params[k], list) else v for k, v in q.items()
    }


def test_translate_refuses_an_encoder_with_a_message():
    at = app(PAGE)
    at.run()
    at.text_input(key="tr_model").set_value("minilm").run()  # typed in the box (a link's minilm falls back)
    no_exception(at)
    assert any("encoder–decoder" in e for e in texts(at.error))
    assert not heatmaps(at)


def test_translate_bad_gold_and_bad_link_values_are_messages():
    at = app(PAGE, query={"tgt": "inu granda ofte vidas un auto ruga eta", "gold": "0-0 x", "layer": "x"})
    at.run()
    no_exception(at)
    assert any("Ignored the link's layer" in w for w in texts(at.warning))
    assert any("Gold alignment not read" in e for e in texts(at.error))
    at.text_area(key="tr_gold").set_value("0-0 99-1").run()
    assert any("outside the sentence" in e for e in texts(at.error))
    assert len(heatmaps(at)) == 2


def test_translate_labels_are_not_markup():
    at = app(PAGE, query={"src": "the <b>cat</b> sees a dog", "tgt": "mao vidas un inu"})
    at.run()
    no_exception(at)
    ticks = heatmaps(at)[0]["layout"]["xaxis"]["ticktext"]
    assert "&lt;unk&gt;" in ticks and not any("<" in t for t in ticks)


def test_view_query_round_trip():
    v = TranslateView(src="a b", tgt="c", layer=2, head=None, method="weight", setting="AWO", gold="0-0")
    back = TranslateView.from_query(v.to_query())
    assert back == v and not back.problems
    bad = TranslateView.from_query({"head": "-1", "method": "x", "setting": "awo", "src": "s" * 50})
    assert bad.head is None and bad.method == "norm" and bad.setting == "AWO" and len(bad.problems) == 2
    cut = TranslateView.from_query({"src": "s" * 50}, max_text_chars=10)
    assert cut.src != "s" * 50 and cut.problems


def test_public_mode_allows_toy_mt_on_translate_only(monkeypatch):
    """NORMVIZ_PUBLIC=1 defaults the allowlist to the embedded models: Translate's own default (toy-mt) among
    them, but the self-attention pages do not offer it."""
    monkeypatch.setenv("NORMVIZ_PUBLIC", "1")
    at = app(PAGE)
    at.run()
    no_exception(at)
    assert not at.error and len(heatmaps(at)) == 2
    explore = app("app.py")
    explore.run()
    no_exception(explore)
    assert explore.selectbox(key="w_model_choice").options == ["minilm", "smollm2"]


def test_explore_with_an_encoder_decoder_points_to_translate():
    at = app("app.py", {"model": "toy-mt"})
    at.run()
    no_exception(at)
    assert not at.error
    assert any("Translate page" in t for t in texts(at.info))


def test_a_link_carrying_another_pages_model_falls_back_to_toy_mt():
    """Explore's model (minilm, smollm2) travels in a shared link; Translate keeps toy-mt and says why."""
    at = app(PAGE, {"model": "smollm2", "src": "the cat sleeps"})
    at.run()
    no_exception(at)
    assert not at.error
    assert at.text_input(key="tr_model").value == "toy-mt" and len(heatmaps(at)) == 2
    assert any("model='smollm2'" in t and "no decoder" in t for t in texts(at.warning))
    assert TranslateView.from_query({"model": "MiniLM"}).model == "toy-mt"
    assert TranslateView.from_query({"model": "Helsinki-NLP/opus-mt-en-de"}).model == "Helsinki-NLP/opus-mt-en-de"


def test_a_source_past_the_models_window_says_so_without_pointing_to_the_token_cap():
    at = app(PAGE, {"src": " ".join(["the big dog often sees a small red car"] * 12)})  # > toy-mt's 64 tokens
    at.run()
    no_exception(at)
    notes = " ".join(texts(at.warning))
    assert "toy-mt's own window (64 tokens)" in notes and "NORMVIZ_MAX_TOKENS" not in notes, notes
    assert heatmaps(at)


def test_translate_stage_mode_names_model_and_text_and_keeps_its_widgets():
    at = app(PAGE, {"present": "1"})
    at.run()
    no_exception(at)
    hms = heatmaps(at)
    assert len(hms) == 2 and all(
        f["layout"]["title"]["subtitle"]["text"].startswith("toy-mt · “the big dog") for f in hms
    )
    assert at.sidebar.toggle(key="tr_present").value is True
    assert at.slider(key="tr_layer").value == 2 and at.selectbox(key="tr_head").value == -1
    # the stage row's narrow head box showed "all heads (layer vie" (screenshot pass, 1280 and 1920)
    assert at.selectbox(key="tr_head").options[0] == "all heads"


def test_a_real_sentence_names_the_words_toy_mt_does_not_know_and_offers_its_examples():
    at = app(PAGE, query={"src": "Hello world, the big dog sees my neighbour"})
    at.run()
    no_exception(at)
    warned = [w for w in texts(at.warning) if "does not know" in w]
    assert len(warned) == 1, texts(at.warning)
    w = warned[0]
    assert "“Hello”" in w and "“neighbour”" in w and "“dog”" not in w and "“big”" not in w
    assert "170" in w and "Examples" in w
    first = (DATA / "test.src").read_text().splitlines()[0]
    assert first in w  # an example sentence offered


def test_a_sentence_it_knows_gets_no_unknown_word_note():
    at = app(PAGE)
    at.run()
    no_exception(at)
    assert not [w for w in texts(at.warning) if "does not know" in w]

"""The two browser scripts are files of their own (normviz/ui/kit/components/*.js, package data), and the controls
the instant-switch script watches are named once (normviz.ui.kit.controls): these fail if a widget key or a head
label is renamed on one side only, or if a script would not ship with an installed package."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess

import pytest
import tomllib

from normviz.ui.kit import components, controls
from normviz.ui.kit.frames import frame_name

from ..helpers.app import ROOT, app, no_exception

INSTANT = components.source("normviz_instant")


def test_every_script_is_a_file_shipped_as_package_data():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = conf["tool"]["setuptools"]["package-data"]["normviz.ui.kit.components"]
    for name, file in components.SCRIPTS.items():
        assert (components.HERE / file).is_file() and components.source(name).strip()
        assert any(fnmatch.fnmatch(file, g) for g in globs), (file, globs)
    assert (components.HERE / "__init__.py").is_file()  # a package: setuptools' find includes it


def test_the_instant_script_reads_every_watched_control_from_its_data_and_names_none_itself():
    watched = controls.watched()
    for field in watched:  # each name the page hands over is read by the script
        assert re.search(r"\b(c|controls)\." + field + r"\b", INSTANT), field
    code = "\n".join(line.split("//")[0] for line in INSTANT.splitlines())  # comments may mention them
    for value in (controls.LAYER_KEY, controls.HEAD_KEY, watched["all_heads"]):
        assert value not in code, value  # written into the script, a rename on the page would not reach it
    assert not re.search(r"""['"/^]head[ \\]""", code)


def test_the_explore_controls_are_the_watched_ones(at):
    no_exception(at)
    layer = at.slider(key=controls.LAYER_KEY)
    head = at.selectbox(key=controls.HEAD_KEY)
    assert layer.label == "Layer" and layer.max == 5
    assert head.options == [controls.head_option(controls.ALL_HEADS)] + [controls.head_option(h) for h in range(12)]
    assert head.options[0] == controls.watched()["all_heads"]
    assert all(o.startswith(controls.HEAD_PREFIX) for o in head.options[1:])


@pytest.mark.skipif(shutil.which("node") is None, reason="no node to run the script's parser")
def test_the_script_parses_every_head_label_the_page_shows_into_the_frame_the_page_sends():
    cases = [[str(layer), controls.head_option(h)] for layer in (0, 3) for h in [controls.ALL_HEADS] + list(range(12))]
    bad = [["1", "head x"], ["1", "heads 2"], ["x", controls.head_option(2)], ["2", ""]]
    js = (
        "const src = require('fs').readFileSync(process.argv[1], 'utf8');"
        "import('data:text/javascript,' + encodeURIComponent(src)).then(m => {"
        " const [cases, c] = JSON.parse(process.argv[2]);"
        " console.log(JSON.stringify(cases.map(([l, h]) => m.frameName(l, h, c)))); });"
    )
    arg = json.dumps([cases + bad, controls.watched()])
    out = subprocess.run(
        ["node", "-e", js, str(components.HERE / "instant_switch.js"), arg],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    got = json.loads(out)
    want = [
        frame_name(int(l), None if h == controls.head_option(controls.ALL_HEADS) else int(h.split()[-1]))
        for l, h in cases
    ]
    assert got[: len(cases)] == want
    assert got[len(cases) :] == [None] * len(bad)


def test_explore_hands_the_script_the_watched_controls(monkeypatch):
    sent = []

    def fake(name):
        def draw(**kwargs):
            sent.append((name, kwargs))

        return draw

    monkeypatch.setattr(components, "component", fake)
    at = app()
    at.run()
    no_exception(at)
    instant = [kw for name, kw in sent if name == "normviz_instant"]
    assert instant and all(kw["data"]["controls"] == controls.watched() for kw in instant)
    assert instant[-1]["data"]["enabled"] and json.loads(instant[-1]["data"]["frames_json"])


def _run_stage_keys(expr: str, arg) -> object:
    """``expr`` evaluated with the stage-keys script imported as ``m`` and ``arg`` as ``a`` (node)."""
    js = (
        "const src = require('fs').readFileSync(process.argv[1], 'utf8');"
        "import('data:text/javascript,' + encodeURIComponent(src)).then(m => {"
        " const a = JSON.parse(process.argv[2]); console.log(JSON.stringify(" + expr + ")); });"
    )
    out = subprocess.run(
        ["node", "-e", js, str(components.HERE / "stage_keys.js"), json.dumps(arg)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return json.loads(out)


@pytest.mark.skipif(shutil.which("node") is None, reason="no node to run the script")
def test_stage_keys_space_plays_and_f_focuses_the_token_the_hover_names():
    """Issue 23: Space → 'play', f → 'focus:<the hovered token's position>' read from the hover names the heatmap
    builder writes (a repeated or bracketed token included); arrows keep their moves."""
    from normviz.viz.heatmap import hover_names

    labels = ["[CLS]", "the", "cat", "the·2", "[5]", "<b>x</b>"]
    names = hover_names(list(range(10, 16)), labels)
    assert _run_stage_keys("a.map(n => m.positionOf(n))", names) == list(range(10, 16))
    points = [{"x": names[0], "y": names[3]}, {"x": 4, "y": 0.5, "customdata": [names[2], ""]}, {"x": 1, "y": 2}]
    assert _run_stage_keys("a.map(p => m.hoveredPosition(p))", points) == [13, 12, None]
    keys = [[" ", None], ["f", 13], ["f", None], ["ArrowRight", 3], ["PageDown", None], ["q", 2]]
    assert _run_stage_keys("a.map(([k, h]) => m.keyAction(k, h))", keys) == [
        "play",
        "focus:13",
        "focus:none",
        "layer+",
        "next",
        None,
    ]


def test_stage_key_presses_move_the_pages_controls():
    """What the server does with each press (normviz.ui.kit.stage.on_key): focus the token, again → none, a position
    the page does not offer → none; 'layer0' (Space at the last layer) rewinds."""
    from streamlit import session_state as ss

    from normviz.ui.kit import stage

    ss.clear()
    ss["w_layer"], ss["w_head"], ss["w_focus"] = 5, -1, None
    press = lambda what: stage.on_key(
        what,
        "w_layer",
        list(range(6)),
        "w_head",
        [-1, 0, 1],
        lambda: None,  # noqa: E731
        focus_key="w_focus",
    )
    press("focus:3")
    assert ss["w_focus"] == 3
    press("focus:3")
    assert ss["w_focus"] is None
    press("focus:4"), press("focus:none")
    assert ss["w_focus"] is None
    press("layer0")
    assert ss["w_layer"] == 0
    press("layer+"), press("head+")
    assert (ss["w_layer"], ss["w_head"]) == (1, 0)
    ss.clear()


@pytest.mark.skipif(shutil.which("node") is None, reason="no node to run the script")
def test_row_click_reads_the_step_from_the_row_label_the_heatmap_writes():
    """The Continuation view's row clicks (row_click.js): the row is the number in the hover name the heatmap
    builder writes for the row (a bracketed or repeated token included), else the cell's own row index."""
    from normviz.viz.heatmap import hover_names

    names = hover_names(list(range(6)), ["␣the", "[3]", "cat", "the·2", "<b>x</b>", "."])
    points = [{"y": n, "x": "a [0]", "pointNumber": [0, 0]} for n in names]
    points += [{"y": "no label", "pointNumber": [7, 2]}, {"y": "no label"}, None]
    js = (
        "const src = require('fs').readFileSync(process.argv[1], 'utf8');"
        "import('data:text/javascript,' + encodeURIComponent(src)).then(m => {"
        " console.log(JSON.stringify(JSON.parse(process.argv[2]).map(p => m.rowOf(p)))); });"
    )
    out = subprocess.run(
        ["node", "-e", js, str(components.HERE / "row_click.js"), json.dumps(points)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert json.loads(out) == [0, 1, 2, 3, 4, 5, 7, None, None]

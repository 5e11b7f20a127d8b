"""Issue 42, operator faults: a truncated or zero-filled converted ``model.safetensors`` or a missing
``tokenizer.json`` in NORMVIZ_CACHE was never converted again (and the load said "Re-save it with
save_pretrained"); NORMVIZ_CACHE naming a file ended in "unexpected FileExistsError"; ``--model smollm`` gave no
"did you mean smollm2"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import normviz
from normviz.core.errors import NormvizError, UnknownModelError
from normviz.models import loading


def _safetensors(path: Path, n_bytes: int = 64) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [n_bytes // 4], "data_offsets": [0, n_bytes]}}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\x01" * n_bytes)


def _fake_conversion(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    _safetensors(folder / "model.safetensors")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """NORMVIZ_CACHE in a temporary folder; the conversion stubbed (it writes a whole fake copy and counts)."""
    monkeypatch.setenv("NORMVIZ_CACHE", str(tmp_path / "cache"))
    calls = []

    def convert(src, target, progress=None):
        calls.append(target)
        if target.exists():
            shutil.rmtree(target)
        _fake_conversion(target)
        return target

    monkeypatch.setattr(loading, "_convert_smollm2", convert)
    monkeypatch.setattr(loading, "_smollm2_gguf_dir", lambda: tmp_path)
    return tmp_path / "cache" / loading.SMOLLM2_CONVERTED, calls


def test_a_whole_safetensors_file_reads_as_whole(tmp_path):
    _safetensors(tmp_path / "m.safetensors")
    assert loading.safetensors_whole(tmp_path / "m.safetensors")


@pytest.mark.parametrize("damage", ["truncated", "zero-filled", "empty", "no tokenizer.json", "no weights", "longer"])
def test_a_damaged_conversion_is_made_again(cache, damage):
    target, calls = cache
    _fake_conversion(target)
    weights = target / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:-10])
    elif damage == "zero-filled":
        weights.write_bytes(b"\x00" * weights.stat().st_size)
    elif damage == "empty":
        weights.write_bytes(b"")
    elif damage == "no tokenizer.json":
        (target / "tokenizer.json").unlink()
    elif damage == "no weights":
        weights.unlink()
    else:
        weights.write_bytes(weights.read_bytes() + b"\x00" * 3)
    assert not loading.smollm2_converted()
    notes = []
    assert loading.smollm2_dir(progress=notes.append) == target
    assert calls == [target]
    assert loading.smollm2_converted() and loading.safetensors_whole(weights)
    assert any("incomplete or damaged" in n for n in notes)


def test_a_whole_conversion_is_not_made_again(cache):
    target, calls = cache
    _fake_conversion(target)
    assert loading.smollm2_dir() == target and calls == []


def test_an_unreadable_converted_copy_says_to_delete_its_folder(tmp_path, monkeypatch, smollm2):
    """A copy that passes the file checks but does not read (its config.json cut short): the message names
    the folder to delete, not save_pretrained."""
    monkeypatch.setenv("NORMVIZ_CACHE", str(tmp_path))
    target = tmp_path / loading.SMOLLM2_CONVERTED
    shutil.copytree(Path(smollm2.source), target, ignore=shutil.ignore_patterns("model.safetensors"))
    _safetensors(target / "model.safetensors")  # whole as a file, but holds none of the model's tensors
    (target / "config.json").write_text("{not json")
    with pytest.raises(UnknownModelError) as err:
        normviz.load("smollm2", device="cpu")
    assert "delete the folder" in str(err.value) and str(target) in str(err.value)
    assert "save_pretrained" not in str(err.value)


def test_normviz_cache_naming_a_file_is_a_clear_error(tmp_path, monkeypatch):
    f = tmp_path / "cachefile"
    f.write_text("x")
    monkeypatch.setenv("NORMVIZ_CACHE", str(f))
    with pytest.raises(NormvizError, match="NORMVIZ_CACHE names .* which is a file"):
        loading.cache_dir()
    monkeypatch.setattr(loading, "_smollm2_gguf_dir", lambda: tmp_path)
    with pytest.raises(NormvizError, match="NORMVIZ_CACHE"):
        loading.smollm2_dir()


def test_cli_with_normviz_cache_a_file_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    f = tmp_path / "cachefile"
    f.write_text("x")
    monkeypatch.setenv("NORMVIZ_CACHE", str(f))
    from normviz.cli import main

    assert main(["export", "--model", "smollm2", "--text", "a b c", "--out", str(tmp_path / "m.npz")]) == 2
    err = capsys.readouterr().err
    assert "NORMVIZ_CACHE" in err and "unexpected" not in err


@pytest.mark.parametrize(
    "slip, meant",
    [("smollm", "smollm2"), ("SmolLM", "smollm2"), ("smolm2", "smollm2"), ("minilm6", "minilm"), ("mini-lm", "minilm")],
)
def test_a_slip_of_an_embedded_name_says_did_you_mean(slip, meant):
    with pytest.raises(UnknownModelError, match=f"did you mean '{meant}'"):
        loading.resolve(slip)


@pytest.mark.parametrize("hub_id", ["gpt2", "bert-base-uncased", "Qwen/Qwen2-0.5B"])
def test_hub_ids_are_not_taken_for_slips(hub_id):
    assert loading.resolve(hub_id) == (hub_id, "hub")

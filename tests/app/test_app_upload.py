"""Explore's file upload for long texts: the file's text goes into the text box (within the upload and token
limits), and a file that can't be used is refused with a message saying what to do."""

from __future__ import annotations

from normviz.ui.kit import data

from ..helpers.app import app, no_exception, texts


def test_an_uploaded_text_is_folded_cut_at_the_text_limit_and_said_so():
    text, notes = data.uploaded_text("talk.txt", "Line one.\n\n  Line   two.\n".encode(), 1000, 100)
    assert text == "Line one. Line two." and notes == []
    text, notes = data.uploaded_text("long.txt", ("word " * 100).encode(), 10_000, 50)
    assert len(text) == 50 and len(notes) == 1 and "first 50" in notes[0]


def test_a_file_that_cannot_be_used_is_refused_with_what_to_do():
    assert data.uploaded_text("big.txt", b"x" * 2000, 1000, 100)[0] is None
    assert "NORMVIZ_MAX_UPLOAD_MB" in data.uploaded_text("big.txt", b"x" * 2000, 1000, 100)[1][0]
    text, notes = data.uploaded_text("photo.txt", b"\xff\xd8\xff\xe0 binary", 1000, 100)
    assert text is None and "not UTF-8" in notes[0]
    assert data.uploaded_text("empty.txt", b" \n\n", 1000, 100) == (None, ["The file 'empty.txt' holds no text."])


def test_explore_offers_the_upload_beside_the_text():
    at = app()
    at.run()
    no_exception(at)
    assert len(at.get("file_uploader")) == 1


def test_utf16_without_a_bom_is_read_with_a_note_and_nul_or_control_bytes_are_refused():
    """Issue 42 (hostile visitors): UTF-16 without a byte-order mark decoded as UTF-8 went into the text box as
    'T\\x00h\\x00e\\x00…' and was analysed with no note."""
    for codec, how in (("utf-16-le", "little-endian"), ("utf-16-be", "big-endian")):
        text, notes = data.uploaded_text("talk.txt", "The cat sat. Über café.".encode(codec), 1000, 100)
        assert text == "The cat sat. Über café." and len(notes) == 1 and how in notes[0] and "UTF-16" in notes[0]
    for raw in (b"The\x00cat\x00\x00sat", b"\x7fELF\x02\x01\x00\x00binary\x00", "The cat\x07 sat\x1b[0m".encode()):
        text, notes = data.uploaded_text("odd.txt", raw, 1000, 100)
        assert text is None and len(notes) == 1, (raw, text)
        assert "NUL" in notes[0] or "control characters" in notes[0]
    text, notes = data.uploaded_text("tabs.txt", b"a\tb\r\nc\x0cd", 1000, 100)
    assert text == "a b c d" and notes == []


def test_a_links_player_that_is_not_a_shown_map_is_named():
    """Issue 42: Explore dropped a player= it could not use with no note (every other dropped value is named)."""
    at = app(query={"player": "bogus", "maps": "attention,norm"})
    at.run()
    no_exception(at)
    assert any("player=bogus" in t and "no layer player" in t for t in texts(at.warning)), texts(at.warning)
    at = app(query={"player": "norm", "maps": "attention,norm"})
    at.run()
    assert not any("player=" in t for t in texts(at.warning))

"""Explore's file upload for long texts: the file's text goes into the text box (within the upload and token
limits), and a file that can't be used is refused with a message saying what to do."""
from __future__ import annotations

from normviz.ui.kit import data

from ..helpers.app import app, no_exception


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

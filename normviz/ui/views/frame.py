"""The page frame: the steps every page repeats between its text box and its own regions -- the model loaded (or
the run stopped under the loader's message), the device line, an empty text refused with the page's own message,
the text's cached session (or the run stopped under its message). Each step stops the run where the page cannot
go on, so a page reads as the regions it draws."""

from __future__ import annotations

from typing import NoReturn

import streamlit as st

from ..kit import st_parts as ui


def model(name: str, device: bool = True, named: bool = False):
    """The model named in the view (loaded once per server, :func:`ui.load_model`); the run stops under the
    loader's message when it cannot be loaded. ``device``: the device line under it. ``named``: an empty name
    stops the run without a message (the pages whose sidebar always names one), else the loader says it."""
    lm = None if named and not name else ui.load_model(name)
    if lm is None:
        st.stop()
    if device:
        ui.show_device(lm)
    return lm


def text(value: str, message: str) -> None:
    """An empty (or blank) text stops the run under the page's ``message`` (what to type)."""
    if not value.strip():
        st.error(message)
        st.stop()


def session(lm, *args, **kwargs):
    """The text's cached session (:func:`ui.session_for`, same arguments); the run stops under its message when
    there is none (the text refused, the memory budget)."""
    s = ui.session_for(lm, *args, **kwargs)
    if s is None:
        st.stop()
    return s


def maps(session, keys: list[str]):
    """``session``'s analysis of ``keys`` (:func:`ui.get_maps`); the run stops under its message when none."""
    a = ui.get_maps(session, keys)
    if a is None:
        st.stop()
    return a


def stop_with(kind: str, message: str) -> NoReturn:
    """A message box (:func:`ui.say`: the visitor's text never read as Markdown) and the run stops."""
    ui.say(kind, message)
    st.stop()

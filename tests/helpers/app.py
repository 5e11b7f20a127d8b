"""Shared bits of the AppTest tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 240  # a first model load on a cold machine


def app(page: str = "app.py", query: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / page), default_timeout=TIMEOUT)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at


def figures(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def heatmaps(at: AppTest) -> list[dict]:
    return [f for f in figures(at) if f["data"] and f["data"][0]["type"] == "heatmap"]


def arr(value) -> np.ndarray:
    """A plotly JSON array: a plain list, or a typed array {"dtype", "bdata" (base64), "shape"}."""
    if isinstance(value, dict) and "bdata" in value:
        import base64

        out = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape:
            out = out.reshape([int(x) for x in str(shape).split(",")])
        return out.astype(float)
    return np.array(value, dtype=float)


def z(fig: dict) -> np.ndarray:
    return arr(fig["data"][0]["z"])


def title(fig: dict) -> str:
    return fig["layout"]["title"]["text"]


def texts(elements) -> list[str]:
    """The text a visitor reads in each element: the app escapes Markdown punctuation in messages that may hold
    visitor input and breaks autolinks with a word joiner (normviz.ui.kit.safe.plain); both undone here."""
    return [re.sub(r"\\([^A-Za-z0-9\s])", r"\1", e.value).replace("\u2060", "") for e in elements]


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]

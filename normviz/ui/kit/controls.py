"""Explore's layer and head controls, named once.

The page's widgets (``st.slider(key=LAYER_KEY)``, ``st.selectbox(key=HEAD_KEY, format_func=head_option)``) and
the instant-switch script (``components/instant_switch.js``, handed :func:`watched` in its data) both read these,
so renaming a key or a label here renames it for both; ``tests/app/test_app_components.py`` fails if they drift.
Pure Python (no Streamlit import).
"""

from __future__ import annotations

from .data import head_label

LAYER_KEY = "w_layer"  # the layer slider
HEAD_KEY = "w_head"  # the head box: options ALL_HEADS, 0 … H-1
ALL_HEADS = -1  # the head box's option for the layer-level map (all heads at once)
HEAD_PREFIX = "head "  # head_option(h) = HEAD_PREFIX + str(h)


def head_option(option: int) -> str:
    """What the head box shows for ``option`` (ALL_HEADS or a head number): "all heads", "head 3"."""
    return head_label(None if option == ALL_HEADS else int(option))


def watched() -> dict[str, str]:
    """The controls as the instant-switch script finds them: widget keys (``.st-key-<key>``) and head labels."""
    return {
        "layer_key": LAYER_KEY,
        "head_key": HEAD_KEY,
        "head_prefix": HEAD_PREFIX,
        "all_heads": head_option(ALL_HEADS),
    }

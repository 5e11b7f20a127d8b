"""The pages' look: the CSS of the normal and the stage mode, and the figures' font size."""

from __future__ import annotations

import streamlit as st

from .sizing import MAIN_COLUMN


def font_size(present: bool) -> int:
    return 18 if present else 12


def apply_style(present: bool = False) -> None:
    """The pages' CSS: the main column uses the page width; stage mode's larger fonts."""
    st.html(f"""<style>
        {MAIN_COLUMN} {{ padding: 4rem 1.5rem 2rem 1.5rem; max-width: none; }}
        [data-testid="stSidebarHeader"] {{ height: 1.2rem; margin-bottom: 0; }}
    </style>""")
    if present:  # stage mode: larger type, and the panels start right under one compact bar of controls
        st.html(f"""<style>
            html, body, [data-testid="stAppViewContainer"] {{ font-size: 20px; }}
            [data-testid="stMarkdownContainer"] p, label, .stCaption {{ font-size: 1.15rem !important; }}
            h1 {{ font-size: 2.6rem !important; }}
            {MAIN_COLUMN} {{ padding: 2.6rem 1.2rem 1.5rem 1.2rem; }}
            [data-testid="stHeader"] {{ background: transparent; height: 2.4rem; }}
            [data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] {{ gap: 0.6rem; }}
            [data-testid="stMainBlockContainer"] label p {{ font-size: 0.95rem !important; }}
            [data-testid="stTable"] table, [data-testid="stTable"] th, [data-testid="stTable"] td {{
                font-size: 1.1rem !important; }}  /* Learn's tables (st.table in stage mode) */
            [data-testid="stMainBlockContainer"] input, [data-testid="stMainBlockContainer"] textarea,
            [data-testid="stMainBlockContainer"] [data-baseweb="select"] {{ font-size: 1.1rem !important; }}
        </style>""")

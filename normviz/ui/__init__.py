"""UI-side helpers for the Streamlit app.

``state``, ``data`` and ``cache`` are pure Python (no Streamlit import) and are unit-tested on their own;
``st_parts`` is the thin Streamlit glue shared by the pages (imported only by the app).
"""

"""UI-side helpers for the Streamlit app.

``state``, ``data``, ``controls``, ``frames``, ``cache`` and ``settings`` are pure Python (no Streamlit import)
and are unit-tested on their own; the Streamlit glue is split by job (``page``, ``session_view``, ``sidebar``,
``pickers``, ``loading``, ``fetch``, ``stores``, ``compare``, ``charts``, ``downloads``, ``links``, ``sizing``,
``instant``, ``style``, ``messages``; the browser scripts in ``components/``), and ``st_parts`` gathers it into
one import for the pages (imported only by the app).
"""

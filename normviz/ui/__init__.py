"""The Streamlit app's side of normviz, in two folders:

- :mod:`.kit`: what every page is built from — the view and its URL round trip (``state``, ``session_view``,
  ``steps``), the server-wide caches and fetching (``stores``, ``fetch``, ``loading``), widgets (``pickers``,
  ``sidebar``, ``controls``, ``stage``), charts and frames (``charts``, ``frames``, ``instant``), the page frame
  (``page``, ``style``, ``messages``, ``safe``) and the browser scripts (``components/``); ``st_parts`` gathers
  it into one import for the pages. ``state``, ``data``, ``controls``, ``frames``, ``cache``, ``settings`` are
  pure Python (no Streamlit import).
- :mod:`.views`: what one page shows, beyond the kit — Why (``why``), Learn (``learn``), Translate
  (``translate``), Explore's long view (``long_view``, ``long_maps``) and its comparison (``compare``).

A view may import the kit, never the other way round (``tests/unit/test_layers.py``).
"""

"""The pages' Streamlit kit, one import (``from normviz.ui import st_parts as ui``); each part lives in a module
of its own job:

- :mod:`.page` — page config, the first steps of every page, the top-level error catch;
- :mod:`.session_view` — the view in session state and the URL, widgets seeded from it (one codec:
  :class:`normviz.ui.kit.state.QueryView`);
- :mod:`.sidebar` — model pickers and stage mode; :mod:`.pickers` — Explore's map picker;
- :mod:`.loading` — loading a model; :mod:`.fetch` — the shared session of a text and its maps (both model
  kinds); :mod:`.stores` — the server-wide caches; :mod:`.keys` — the keys a model offers and their titles;
- :mod:`.compare` — a comparison's second side; :mod:`.charts`, :mod:`.downloads`, :mod:`.links`;
- :mod:`.sizing` and :mod:`.instant` — the two browser scripts (``components/*.js``): the column width and
  instant layer/head switching; :mod:`.stage` — stage mode's keyboard and self-explaining panels;
  :mod:`.style` — CSS; :mod:`.messages` — message boxes.

Pages read top to bottom: widgets → :func:`load_model` → :func:`session_for` (one cached
:class:`normviz.Session` per model, text, pair/target and token cap) → :func:`get_maps` (``session.get(keys)``; a
refused key arrives in ``Analysis.refused`` and is shown in its panel's place) → figures from :mod:`normviz.viz`.
"""

from __future__ import annotations

from .charts import chart, image_format, outline_token, table  # noqa: F401
from .downloads import view_html  # noqa: F401
from .fetch import fx_norms, get_maps, heavy_worker, notice_waited, session_for, session_options  # noqa: F401
from .instant import instant_frames, instant_switch  # noqa: F401
from .keys import clamp_head, default_keys, known_keys, opt_in_keys, title  # noqa: F401
from .links import learn_link, link_to_page  # noqa: F401
from .loading import load_model, show_device  # noqa: F401
from .messages import say, shorten_error  # noqa: F401
from .page import keep_widgets_across_stage, page_config, presenting, run_page, start_page  # noqa: F401
from .pickers import map_picker  # noqa: F401
from .safe import lit, plain  # noqa: F401
from .session_view import (  # noqa: F401
    VIEW,
    current_page,
    follow_text,
    forget_widgets_on_page_change,
    load_view,
    save_view,
    seed,
    seed_index,
    text_box,
    view_from_url,
)
from .settings import settings  # noqa: F401
from .sidebar import EMBEDDED_CHOICES, OTHER, second_model_picker, self_attention_models, sidebar  # noqa: F401
from .sizing import main_width, panel_width, screen  # noqa: F401
from .stage import (  # noqa: F401
    context_line,
    context_text,
    escape_key,
    go_to_step,
    grid_clicks,
    keyboard,
    leave_stage,
    row_clicks,
    show_talk_link,
    step_controls,
    step_indicator,
    step_note,
    talk_link,
    walk_steps,
)
from .state import ViewState  # noqa: F401
from .stores import SESSION_ENTRIES, model_cache, session_cache  # noqa: F401
from .style import apply_style, font_size  # noqa: F401
from .theme import figure_theme, themed  # noqa: F401
from .theme import follow as follow_theme  # noqa: F401

"""Plotly figure builders. They take arrays and token labels and return ``plotly.graph_objects.Figure``s;
nothing here knows about models or Streamlit. Figures of corpus statistics: :mod:`normviz.viz.corpus`.

heatmap (one map), lines (bertviz-style links), difference (A − B), fx_strip (‖f(x_j)‖ per token),
layer_player (a map through the layers), bars / grid / special_share_scatter (Explore's focus bars,
Overview), plotly_config (chart toolbar: PNG/SVG download), standalone_html (one offline page),
to_png / to_svg (files without a browser tab; optional kaleido)."""

from .compare import difference, fx_strip, row_normalise
from .figures import bars, grid, grid_bar_room, special_share_scatter
from .heatmap import heatmap
from .html import plotly_config, standalone_html
from .images import to_image, to_png, to_svg
from .lines import lines
from .player import layer_player

__all__ = [
    "bars",
    "difference",
    "fx_strip",
    "grid",
    "grid_bar_room",
    "heatmap",
    "layer_player",
    "lines",
    "plotly_config",
    "row_normalise",
    "special_share_scatter",
    "standalone_html",
    "to_image",
    "to_png",
    "to_svg",
]

"""Plotly figure builders. They take arrays and token labels and return ``plotly.graph_objects.Figure``s;
nothing here knows about models or Streamlit. Figures of corpus statistics: :mod:`normviz.viz.corpus`."""
from .figures import bars, grid, heatmap, special_share_scatter

__all__ = ["bars", "grid", "heatmap", "special_share_scatter"]

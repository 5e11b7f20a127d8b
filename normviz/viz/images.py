"""PNG / SVG files of a figure without a browser tab (papers, slides, scripts), through plotly's kaleido.

Optional: kaleido (``pip install kaleido==1.5.1``) drives a local Chrome/Chromium. In the app the chart
toolbar's camera button does the same in the visitor's browser (:func:`normviz.viz.plotly_config`)."""

from __future__ import annotations

import plotly.graph_objects as go

from ..core.errors import MissingPackageError, NormvizError


def to_image(fig: go.Figure, fmt: str = "png", scale: float = 2) -> bytes:
    """The figure as ``fmt`` ("png" or "svg") bytes; ``scale`` multiplies a PNG's pixels."""
    if fmt not in ("png", "svg"):
        raise NormvizError(f"fmt must be 'png' or 'svg', got {fmt!r}.")
    try:
        import kaleido  # noqa: F401
    except ModuleNotFoundError:
        raise MissingPackageError(
            "PNG/SVG export needs kaleido: pip install kaleido==1.5.1 (it uses a local "
            "Chrome or Chromium); or use the camera button of the chart's toolbar."
        ) from None
    try:
        return fig.to_image(format=fmt, scale=scale if fmt == "png" else 1)
    except (RuntimeError, OSError, ValueError) as exc:
        raise NormvizError(
            f"kaleido could not render the figure ({' '.join(str(exc).split())[:200]}); it needs "
            "Chrome or Chromium installed."
        ) from None


def to_png(fig: go.Figure, scale: float = 2) -> bytes:
    return to_image(fig, "png", scale)


def to_svg(fig: go.Figure) -> bytes:
    return to_image(fig, "svg")

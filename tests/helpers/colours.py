"""Colours as a reader sees them: parsing plotly's colour strings, blending over a page, WCAG contrast, the
colour a scale gives at a point (the dark-theme tests)."""

from __future__ import annotations

import re

LIGHT, DARK = "#ffffff", "#0e1117"  # Streamlit's light and dark pages


def rgb(colour: str) -> tuple[float, float, float, float]:
    """(r, g, b, alpha) in 0…1 of '#rrggbb', 'rgb(…)' or 'rgba(…)'."""
    colour = colour.strip()
    if colour.startswith("#"):
        return tuple(int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)) + (1.0,)
    parts = [float(v) for v in re.findall(r"[\d.]+", colour)]
    return (parts[0] / 255, parts[1] / 255, parts[2] / 255, parts[3] if len(parts) > 3 else 1.0)


def over(colour: str, page: str) -> tuple[float, float, float]:
    """``colour`` as seen on ``page`` (alpha blended)."""
    r, g, b, a = rgb(colour)
    pr, pg, pb, _ = rgb(page)
    return (a * r + (1 - a) * pr, a * g + (1 - a) * pg, a * b + (1 - a) * pb)


def luminance(c) -> float:
    c = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]


def contrast(colour: str, page: str) -> float:
    la, lb = sorted((luminance(over(colour, page)), luminance(over(page, page))), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def colour_at(scale, t: float) -> str:
    """The colour a plotly colour scale gives at ``t`` in 0…1 (linear between its stops), as '#rrggbb'."""
    stops = [(float(p), rgb(c)) for p, c in scale]
    for (p0, c0), (p1, c1) in zip(stops, stops[1:]):
        if p0 <= t <= p1:
            w = 0.0 if p1 == p0 else (t - p0) / (p1 - p0)
            return "#" + "".join(f"{round(255 * ((1 - w) * a + w * b)):02x}" for a, b in zip(c0[:3], c1[:3]))
    raise ValueError(t)

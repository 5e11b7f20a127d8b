"""Token labels on axes and in hovers: sizes from the number of tokens, abbreviation, repeated-token notes.

Sizing rule (one place, used by every token figure): a label needs a cell of about 1.25 × its font size.
The tick font is the largest that fits the panel's width hint (between a floor and the base font); when even
the floor does not fit, the figure grows (``side`` exceeds the hint) so that every label stays readable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRESENT_FONT = 18  # stage mode: labels at least this large (px)
MIN_FONT = 9  # below this a label is not readable
CELL_PER_FONT = 1.25
_SUFFIX = re.compile(r"^(.*)·(\d+)$")


@dataclass(frozen=True)
class Sizing:
    side: int  # plot area side in px (square)
    tick_font: int  # px
    max_chars: int  # labels longer than this are abbreviated (full text in the hover)
    grown: bool  # True when the plot is larger than the width hint asked for


def sizing(n: int, *, width: int | None = None, font_size: int = 12, present: bool = False) -> Sizing:
    """Plot side and tick font for ``n`` tokens in a panel about ``width`` px wide (None: 560, present: 820)."""
    base = max(font_size, PRESENT_FONT) if present else font_size
    floor = PRESENT_FONT if present else MIN_FONT
    target = int(width or (820 if present else 560))
    n = max(1, int(n))
    fit = int(target / n / CELL_PER_FONT)
    tick = max(floor, min(base, fit))
    side = max(target, int(round(n * tick * CELL_PER_FONT)))
    max_chars = 14 if n <= 20 else 10 if n <= 60 else 8
    return Sizing(side=side, tick_font=tick, max_chars=max_chars, grown=side > target)


@dataclass(frozen=True)
class Fit:
    tick_font: int  # px
    max_chars: int  # labels longer than this are abbreviated
    step: int  # every step-th token is labelled (1: all)
    length: int  # px the n tokens span
    grown: bool  # True when the axis is longer than the length asked for (every token labelled)


def fit_labels(n: int, length: int | None = None, *, font_size: int = 12, present: bool = False) -> Fit:
    """The one labelling rule of every token axis (heatmaps, strips, bars, lines, alignments): the tick font
    of :func:`sizing`; given the ``length`` in px the axis has (a page column cannot grow: Streamlit fits a
    chart to it), when even the floor font does not fit, every ``step``-th token is labelled, so labels stay
    a cell (1.25 × the font) apart; without a length the axis grows to label every token."""
    size = sizing(n, width=length, font_size=font_size, present=present)
    if length is not None and size.side > length:
        return Fit(size.tick_font, size.max_chars, -(-size.side // max(1, int(length))), max(1, int(length)), False)
    return Fit(size.tick_font, size.max_chars, 1, size.side, size.grown)


CHAR_PER_FONT = 0.62  # the width of a character of the app's sans-serif font, in font sizes (about)


def word_step(words: list[str], spacing_px: float, font_size: int, max_chars: int = 12) -> int:
    """Horizontal labels (an alignment's rows of words): every step-th word is labelled so that neighbours
    are a label's width (``CHAR_PER_FONT`` × font × its characters, at most ``max_chars``) plus half a font
    apart, ``spacing_px`` being the px between two words' centres."""
    longest = max((min(len(w), max_chars) for w in words), default=1)
    need = CHAR_PER_FONT * font_size * longest + font_size / 2
    return max(1, -(-int(need) // max(1, int(spacing_px))))


def abbreviate(label: str, max_chars: int) -> str:
    """'international·2' → 'internati…·2': cut the token, keep the occurrence suffix."""
    m = _SUFFIX.match(label)
    base, suffix = (m.group(1), "·" + m.group(2)) if m else (label, "")
    if len(base) <= max_chars:
        return label
    return base[: max(1, max_chars - 1)] + "…" + suffix


def plotly_text(text) -> str:
    """``text`` as plotly shows it literally. Plotly reads ``<b>``, ``<br>``, ``<a href>`` … in tick labels,
    titles, hovers and annotations as markup and decodes entities, so ``&``, ``<``, ``>`` become ``&amp;``,
    ``&lt;``, ``&gt;``. The one escaping function for every label and title a figure shows: the viz builders
    apply it to what they are given (tokens, titles, names), so the app, the HTML export and notebook figures
    all show ``<b>x</b>`` as typed. A newline is the one line break a caller can ask for (``<br>``). Cut
    (:func:`abbreviate`) before escaping, never after."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", "<br>")


def plotly_texts(texts) -> list[str]:
    return [plotly_text(t) for t in texts]


def ordinal(k: int) -> str:
    if 10 <= k % 100 <= 20:
        return f"{k}th"
    return f"{k}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th') }"


def occurrence_note(label: str) -> str:
    """'the·2' → "the 2nd occurrence of 'the'"; '' for a label without the repeat suffix."""
    m = _SUFFIX.match(label)
    if not m:
        return ""
    return f"the {ordinal(int(m.group(2)))} occurrence of {m.group(1)!r}"


def with_positions(positions, labels) -> list[str]:
    """Hover names: 'label [position]', escaped for plotly (:func:`plotly_text`)."""
    return [plotly_text(f"{lab} [{pos}]") for pos, lab in zip(positions, labels)]


def unique_labels(labels: list[str]) -> list[str]:
    """Axis labels that keep repeated tokens apart: 'the', 'the' → 'the', 'the·2' (the hover explains the
    suffix: :func:`occurrence_note`); a blank token is shown as its repr."""
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        lab = lab if lab.strip() else repr(lab)
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab}·{seen[lab]}")
    return out


_POSITION = re.compile(r"\[(\d+)\](?: \(.*\))?$")


def position_of(name) -> int | None:
    """The token position in a heatmap axis name ('the·2 [5] (the 2nd occurrence of 'the')' → 5), e.g. from
    a Streamlit plotly selection event (``point["x"]`` / ``point["y"]``); None for anything else."""
    m = _POSITION.search(str(name)) if name is not None else None
    return int(m.group(1)) if m else None

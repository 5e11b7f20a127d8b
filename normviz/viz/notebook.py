"""The notebook API: ``normviz.show(analysis, maps=…, layer=…, head=…, view=…)`` → a list of plotly figures.

>>> a = normviz.Session(normviz.load("minilm"), "The cat sat on the mat.").get(["attention", "norm"])
>>> figs = normviz.show(a, maps=["attention", "norm"], layer=2, view="lines")
>>> figs[0].show()                                   # or normviz.viz.standalone_html(figs) for one offline page
"""

from __future__ import annotations

import numpy as np

from .. import viz
from ..core.analysis import pair_boundary
from ..core.errors import NormvizError
from ..core.fx import norms_from_maps
from ..methods.keyspace import key_info, layer_view, same_at_all_heads, unit
from .labels import unique_labels

VIEWS = ("heatmap", "lines", "player")
VALUES = ("raw", "share")


def fx_for(analysis, layer: int, head: int | None) -> np.ndarray | None:
    """‖f^h(x_j)‖ of one head ([n]); head None: the mean over heads; None without attention and norm."""
    if "attention" not in analysis or "norm" not in analysis:
        return None
    f = norms_from_maps(analysis["attention"][layer], analysis["norm"][layer])  # [H, n]
    return f.mean(0) if head is None else f[head]


def square_keys(analysis) -> list[str]:
    """The computed token-to-token maps ([L,H,n,n] or [L,n,n]) of an Analysis."""
    n = analysis.n_tokens
    return [k for k, v in analysis.arrays.items() if v.ndim in (3, 4) and v.shape[-2:] == (n, n)]


def _strip_key(keys: list[str], head: int | None) -> str | None:
    """The map the ‖f(x_j)‖ strip follows: ``norm``, or for all heads its view (``norm_layer``) when ``norm`` is
    absent."""
    if "norm" in keys:
        return "norm"
    view = layer_view("norm")
    return view if head is None and view in keys else None


def _title(key: str, layer: int, head: int | None, values: str) -> str:
    info = key_info(key)
    where = f"layer {layer}" + ((", all heads" if head is None else f", head {head}") if info.per_head else "")
    return f"{info.title} · {where}" + (" · row shares" if values == "share" else "")


def show(
    analysis,
    maps: list[str] | str | None = None,
    layer: int = 0,
    head: int | None = None,
    view: str = "heatmap",
    *,
    threshold: float = 0.0,
    focus: int | None = None,
    values: str = "raw",
    shared_scale: bool = False,
    strip: bool = False,
    present: bool = False,
    font_size: int = 12,
    width: int | None = None,
) -> list:
    """Plotly figures of ``maps`` (default: every computed [n, n] map) at ``layer``/``head`` of an Analysis.

    Returns a **list**, one figure per map in the order given; with ``strip=True`` the ‖f(x_j)‖ strip
    (:func:`normviz.viz.fx_strip`) follows the ``norm`` map (or ``norm_layer`` without it): per head, or
    the mean over heads for ``head=None``; it needs ``attention`` and ``norm`` computed.
    ``view``: "heatmap", "lines" (bertviz-style) or "player" (the map animated through the layers).
    ``threshold`` (0…1): hide links / draw cells as 0 below that fraction of the largest value; ``focus``
    (a token position): isolate its links in the lines view, outline its row and column in heatmaps.
    ``values="share"``: rows normalised to 1.
    ``shared_scale``: one colour range for all heatmaps. Causal masks and a pair's divider come from the
    Analysis. ``head=None`` for per-head keys is the layer view (:meth:`Analysis.map`)."""
    if view not in VIEWS:
        raise NormvizError(f"view must be one of {', '.join(VIEWS)}, got {view!r}.")
    if values not in VALUES:
        raise NormvizError(f"values must be 'raw' or 'share', got {values!r}.")
    keys = [maps] if isinstance(maps, str) else list(maps) if maps is not None else square_keys(analysis)
    labels = unique_labels(list(analysis.labels))
    boundary = pair_boundary(analysis)
    mats = {}
    for k in keys:
        m = analysis.map(k, layer, head)
        mats[k] = viz.row_normalise(m) if values == "share" else m
    lo = hi = None
    if shared_scale and mats:
        lo = min(float(np.nanmin(m)) for m in mats.values())
        hi = max(float(np.nanmax(m)) for m in mats.values())
    common = dict(font_size=font_size, present=present)
    figs = []
    for k, m in mats.items():
        title = _title(k, layer, head, values)
        if view == "lines":
            figs.append(
                viz.lines(
                    m, labels, threshold=threshold, focus=focus, title=title, boundary=boundary, width=width, **common
                )
            )
        elif view == "player":
            arr = analysis[k]
            stack = arr if arr.ndim == 3 else np.stack([analysis.map(k, li, head) for li in range(arr.shape[0])])
            stack = viz.row_normalise(stack) if values == "share" else stack
            figs.append(
                viz.layer_player(
                    stack,
                    labels,
                    title=_title(k, layer, head, values).split(" · ")[0],
                    causal=analysis.causal,
                    boundary=boundary,
                    colorbar_title=unit(k, values),
                    start=layer % stack.shape[0],
                    width=width,
                    **common,
                )
            )
        else:
            figs.append(
                viz.heatmap(
                    m,
                    labels,
                    title=title,
                    zmin=lo,
                    zmax=hi,
                    causal=analysis.causal,
                    boundary=boundary,
                    colorbar_title=unit(k, values),
                    width=width,
                    threshold=threshold,
                    focus=focus,
                    **common,
                )
            )
        if strip and k == _strip_key(keys, head) and (f := fx_for(analysis, layer, head)) is not None:
            what = "mean over heads of ‖f^h(x_j)‖" if head is None else f"‖f(x_j)‖, head {head}"
            figs.append(viz.fx_strip(f, labels, title=f"{what} · layer {layer}", width=width, focus=focus, **common))
    return figs


def default_view(
    analysis, layer: int = 0, head: int | None = None, view: str = "heatmap", width: int = 600
) -> tuple[list, list[str]]:
    """The page ``python -m normviz export … --html`` writes: every computed [n, n] map at ``layer``/``head``
    (with the ‖f(x_j)‖ strip after ``norm``), then attention − norm (rows normalised) when both are there.
    Returns (figures, captions); captions are each key's one-line definition."""
    keys = square_keys(analysis)
    if head is None:  # a per-head key whose all-heads view is shown too (norm, norm_layer): the same numbers twice
        keys = [k for k in keys if k not in same_at_all_heads(keys)]
    figs = show(analysis, keys, layer=layer, head=head, view=view, strip=True, width=width)
    captions = []
    for k in keys:
        captions.append(key_info(k).description)
        if k == _strip_key(keys, head) and "attention" in analysis and "norm" in analysis:
            captions.append("‖f(x_j)‖: how long token j's transformed vector is; ‖α_ij f(x_j)‖ = α_ij · ‖f(x_j)‖.")
    if "attention" in analysis and "norm" in analysis and view != "player":
        labels = unique_labels(list(analysis.labels))
        figs.append(
            viz.difference(
                analysis.map("attention", layer, head),
                analysis.map("norm", layer, head),
                labels,
                name_a="attention",
                name_b="norm",
                causal=analysis.causal,
                boundary=pair_boundary(analysis),
                width=width,
                title=f"attention − norm (rows normalised to sum 1) · layer {layer}",
            )
        )
        captions.append(
            "Red: the weight gives the pair a larger share than the vectors do; blue: smaller "
            "(Kobayashi et al. 2020: weight ≠ contribution)."
        )
    return figs, captions

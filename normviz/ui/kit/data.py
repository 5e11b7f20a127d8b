"""Pure functions from an Analysis to what a page shows: panel matrices, hidden specials, shares, exports."""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ...core.analysis import pair_boundary  # noqa: F401  (the one rule, for the pages)
from ...core.errors import NormvizError
from ...methods import GROUPS, keyspace
from ...methods.keyspace import unit  # noqa: F401  (the colour bar's title, for the pages)
from ...viz.labels import unique_labels  # noqa: F401  (the pages' axis labels: 'the', 'the·2')


@dataclass
class Panel:
    key: str
    title: str
    matrix: np.ndarray  # [m, m] as shown
    row_labels: list[str]
    col_labels: list[str]
    index: list[int]  # original token positions of the shown rows/columns
    note: str = ""


def head_label(head: int | None) -> str:
    return "all heads" if head is None else f"head {head}"


def panel_title(key: str, layer: int, head: int | None) -> str:
    info = keyspace.key_info(key)
    where = f"layer {layer}"
    if info.per_head:
        where += f", {head_label(head)}"
    return f"{info.title} · {where}"


def row_shares(matrix: np.ndarray) -> np.ndarray:
    """Each row divided by the sum of its absolute values (rows of all zeros stay zero)."""
    denom = np.abs(matrix).sum(axis=-1, keepdims=True)
    return np.divide(matrix, denom, out=np.zeros_like(matrix, dtype=np.float64), where=denom > 0)


def shown_matrix(
    matrix: np.ndarray, special: np.ndarray, hide_special: bool, values: str
) -> tuple[np.ndarray, list[int]]:
    """Drop special tokens' rows and columns when asked, then (for ``values='share'``) renormalise rows.

    Hiding specials always renormalises rows over the tokens that remain, whatever ``values`` is, because a
    row that lost its [CLS]/[SEP] part no longer sums to what it did.
    """
    n = matrix.shape[0]
    keep = [i for i in range(n) if not (hide_special and special[i])]
    if not keep:  # only special tokens: nothing to hide to
        keep = list(range(n))
    out = np.asarray(matrix, dtype=np.float64)[np.ix_(keep, keep)]
    if values == "share" or (hide_special and len(keep) < n):
        if values == "raw":
            # keep the map's units: rescale each row so it keeps its original total
            full = np.abs(np.asarray(matrix, dtype=np.float64)[keep]).sum(-1, keepdims=True)
            out = row_shares(out) * full
        else:
            out = row_shares(out)
    return out, keep


def shown_of(analysis, key: str, layer: int, head: int | None, hide_special: bool, values: str):
    """:func:`shown_matrix` of ``analysis.map(key, layer, head)``, computed once per map array and view
    (:mod:`normviz.ui.kit.memo`; read-only)."""
    from .memo import memoised

    special = np.asarray(analysis.special, bool)
    memo_key = ("shown", layer, head, hide_special, values, special.tobytes())  # map(): one quantity per call
    return memoised(
        analysis.arrays[key],
        memo_key,
        lambda: shown_matrix(analysis.map(key, layer, head), special, hide_special, values),
    )


def build_panels(
    analysis, keys: list[str], layer: int, head: int | None, hide_special: bool, values: str
) -> list[Panel]:
    labels = unique_labels(list(analysis.labels))
    panels = []
    for key in keys:
        if key not in analysis:
            continue
        m, keep = shown_of(analysis, key, layer, head, hide_special, values)
        shown = [labels[i] for i in keep]
        panels.append(Panel(key, panel_title(key, layer, head), m, shown, shown, keep))
    return panels


def scale_group(key: str) -> str:
    """The colour-scale group of a map when panels share scales: the per-head maps (α, ‖αf‖ …) share one, the
    whole-layer maps (residual, LN-aware, rollouts …) another — their diagonal would otherwise set the maximum and
    darken α and ‖αf‖ on long texts."""
    try:
        per_head = keyspace.key_info(key).per_head
    except NormvizError:  # not a map key (a test's stand-in): a group of its own kind
        return "other"
    return "per-head" if per_head else "whole-layer"


SCALE_NOTE = (
    "Colour scales: the per-head maps (α, ‖αf‖ …) share one, the whole-layer maps (residual, LN-aware …) "
    "another (sidebar: Shared colour scales)."
)
SHARED_SCALE_HELP = (
    "On: the per-head maps (α, ‖αf‖, …) share one colour scale and the whole-layer maps (residual, "
    "LN-aware, rollouts, …) another, so a residual map's bright diagonal does not darken α and ‖αf‖ "
    "on long texts. Off: each panel has its own scale."
)


def color_range(panels: list[Panel], shared: bool) -> list[tuple[float, float]]:
    """(zmin, zmax) per panel: when shared, one range per :func:`scale_group` (per-head maps together, whole-layer
    maps together); symmetric around 0 for signed maps."""

    def rng(ms):
        lo = min(float(np.nanmin(m)) for m in ms)
        hi = max(float(np.nanmax(m)) for m in ms)
        if lo < 0:
            r = max(abs(lo), abs(hi))
            return -r, r
        return 0.0, hi if hi > 0 else 1.0

    if not panels:
        return []
    if shared:
        groups: dict[str, list[np.ndarray]] = {}
        for p in panels:
            groups.setdefault(scale_group(p.key), []).append(p.matrix)
        joint = {g: rng(ms) for g, ms in groups.items()}
        return [joint[scale_group(p.key)] for p in panels]
    return [rng([p.matrix]) for p in panels]


def compared_ranges(left: list[Panel], right: list[Panel], shared: bool) -> tuple[list, list]:
    """(zmin, zmax) of each side of a comparison on one colour scale: the same map's two panels share a range
    (with ``shared``, every panel of both sides does), so equal colours mean equal values across the sides."""
    if shared:
        ranges = color_range(left + right, True)
        return ranges[: len(left)], ranges[len(left) :]
    by_key: dict[str, list[Panel]] = {}
    for p in left + right:
        by_key.setdefault(p.key, []).append(p)
    joint = {k: color_range(ps, True)[0] for k, ps in by_key.items()}
    return [joint[p.key] for p in left], [joint[p.key] for p in right]


@dataclass(frozen=True)
class Disagreement:
    """The cell where two maps' row shares differ most: row ``row`` (receiving) gives ``col`` (contributing)
    ``share_a`` of its row in map A and ``share_b`` in map B."""

    row: str
    col: str
    share_a: float
    share_b: float


def largest_difference(a: Panel, b: Panel) -> Disagreement | None:
    """argmax_ij |a_ij / Σ_j |a_ij| − b_ij / Σ_j |b_ij|| over the cells both panels show (masked cells, NaN,
    count as 0); None when the panels differ in shape or agree everywhere."""
    ma, mb = np.nan_to_num(np.asarray(a.matrix, np.float64)), np.nan_to_num(np.asarray(b.matrix, np.float64))
    if ma.shape != mb.shape or not ma.size:
        return None
    sa, sb = row_shares(ma), row_shares(mb)
    d = np.abs(sa - sb)
    i, j = np.unravel_index(int(np.argmax(d)), d.shape)
    if d[i, j] <= 0:
        return None
    return Disagreement(a.row_labels[i], a.col_labels[j], float(sa[i, j]), float(sb[i, j]))


def callout_text(d: Disagreement, name_a: str = "α", name_b: str = "‖αf‖") -> str:
    """One line naming the largest difference: 'α gives 24 % of row “it” to “[CLS]”; ‖αf‖ 8 %.' (plain text: the
    page prints it escaped, the tokens are the visitor's)."""
    pct = lambda x: f"{100 * x:.0f} %"  # noqa: E731
    return (
        f"Largest difference: {name_a} gives {pct(d.share_a)} of row “{d.row}” to “{d.col}”; {name_b} {pct(d.share_b)}."
    )


CALLOUT_HELP = (
    "The cell where the two maps' row shares differ most (masked cells count as 0): a weight is not a "
    "contribution when ‖f(x_j)‖ is small or large."
)


def weights_norm_pair(panels: list[Panel]) -> tuple[Panel, Panel] | None:
    """The weights-vs-norm pair among ``panels`` (α and ‖αf‖, or ‖Σαf‖ at all heads), or None."""
    by_key = {p.key: p for p in panels}
    norm = by_key.get("norm") or by_key.get(keyspace.layer_view("norm"))  # all heads: norm shown as its view
    return (by_key["attention"], norm) if "attention" in by_key and norm is not None else None


def focus_rows(panels: list[Panel], token: int) -> dict[str, np.ndarray]:
    """Row ``token`` (an original position) of each panel; panels that hide it are left out."""
    out = {}
    for p in panels:
        if token in p.index:
            out[p.title] = p.matrix[p.index.index(token)]
    return out


# --- exports ----------------------------------------------------------------------------------------------

CSV_MASKED_NOTE = (
    "A decoder's token cannot see a later one: those cells (column_position > row_position) have "
    "an empty value and masked = 1 in the CSV, not 0."
)


def panels_csv(panels: list[Panel], causal: bool = False) -> bytes:
    """Long format: one line per cell of every shown panel. ``causal`` (a decoder): a cell whose column comes
    after its row is masked, written with an empty value and ``masked`` = 1 (a 0 would read as a measured
    zero)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["map", "panel", "row_position", "row_token", "column_position", "column_token", "value", "masked"])
    for p in panels:
        for a, i in enumerate(p.index):
            for b, j in enumerate(p.index):
                masked = causal and j > i
                value = "" if masked or not np.isfinite(p.matrix[a, b]) else f"{p.matrix[a, b]:.8g}"
                w.writerow([p.key, p.title, i, p.row_labels[a], j, p.col_labels[b], value, int(masked)])
    return buf.getvalue().encode("utf-8")


def panels_npz(panels: list[Panel], tokens: list[str]) -> bytes:
    """``tokens`` (all), and per panel ``<key>`` (the shown matrix) and ``<key>__positions`` (its tokens)."""
    buf = io.BytesIO()
    arrays = {"tokens": np.array(tokens, dtype=str)}
    for p in panels:
        arrays[p.key] = p.matrix
        arrays[p.key + "__positions"] = np.array(p.index, dtype=np.int64)
    np.savez(buf, **arrays)
    return buf.getvalue()


# --- overview ---------------------------------------------------------------------------------------------


def per_head_stack(analysis, key: str) -> np.ndarray:
    """[L, H, n, n] for per-head keys, [L, 1, n, n] for layer-level keys."""
    arr = analysis[key]
    return arr if arr.ndim == 4 else arr[:, None]


def special_share(stack: np.ndarray, special: np.ndarray) -> np.ndarray:
    """[L, H]: the mean over receiving tokens of the share of each row that goes to special tokens."""
    a = np.abs(np.asarray(stack, dtype=np.float64))
    total = a.sum(-1)
    to_special = a[..., special.astype(bool)].sum(-1)
    share = np.divide(to_special, total, out=np.zeros_like(total), where=total > 0)
    return share.mean(-1)


def crop_tokens(analysis_n: int, n_cells_heads: int, limit_cells: int = 1_500_000) -> int:
    """How many leading tokens the overview grid can show within ``limit_cells`` heatmap cells."""
    m = analysis_n
    while m > 2 and n_cells_heads * m * m > limit_cells:
        m -= 1
    return m


def stacks_npz(stacks: dict[str, np.ndarray], tokens: list[str]) -> bytes:
    """``tokens`` and one [L, H, n, n] array per map shown on the Overview page."""
    buf = io.BytesIO()
    np.savez(buf, tokens=np.array(tokens, dtype=str), **{k: np.asarray(v) for k, v in stacks.items()})
    return buf.getvalue()


# --- corpus uploads ---------------------------------------------------------------------------------------


def upload_refusal(name: str, size: int, max_bytes: int) -> str | None:
    """Why an uploaded file is refused before it is read (too large), or None. Streamlit's own
    ``server.maxUploadSize`` stops larger bodies earlier; this check holds whatever that is set to."""
    if size > max_bytes:
        return (
            f"The file {name[:100]!r} is {size / 2**20:.1f} MB; this deployment accepts files up to "
            f"{max_bytes / 2**20:.1f} MB (NORMVIZ_MAX_UPLOAD_MB). Upload fewer lines."
        )
    return None


def _control(c: str) -> bool:
    """A C0/C1 control character or DEL that is not white space (tab, line breaks, form feed are kept)."""
    o = ord(c)
    return (o < 32 or 127 <= o < 160) and not c.isspace()


def _utf16_without_bom(raw: bytes) -> tuple[str | None, str]:
    """(text, "little-endian"/"big-endian") where ``raw`` reads as UTF-16 text with no byte-order mark: its NULs
    on one side of each byte pair (the high bytes of ASCII and Latin letters), the decode clean; else (None, "")."""
    if len(raw) < 2 or len(raw) % 2:
        return None, ""
    odd, even = raw[1::2].count(0), raw[0::2].count(0)
    for zeros, other, codec, how in ((odd, even, "utf-16-le", "little-endian"), (even, odd, "utf-16-be", "big-endian")):
        if zeros >= 0.5 * (len(raw) // 2) and other == 0:
            try:
                return raw.decode(codec), how
            except UnicodeDecodeError:
                return None, ""
    return None, ""


def uploaded_text(name: str, raw: bytes, max_bytes: int, max_chars: int) -> tuple[str | None, list[str]]:
    """The text of a file a visitor uploaded for Explore's text box, and what to tell them: (None, [why]) for a
    file over ``max_bytes`` or not UTF-8 text; else its text with runs of blank space folded into one space, cut
    at ``max_chars`` (NORMVIZ_MAX_TOKENS × 50, the text box's own limit) with a note saying so."""
    refusal = upload_refusal(name, len(raw), max_bytes)
    if refusal:
        return None, [refusal]
    notes = []
    if b"\x00" in raw:  # UTF-8 text holds no NUL: UTF-16 without its byte-order mark, or not text at all
        text, how = _utf16_without_bom(raw)
        if text is None:
            return None, [
                f"The file {name[:100]!r} holds NUL bytes: it is not a text file. Save it as plain text "
                "(.txt, UTF-8) and upload it again."
            ]
        notes.append(
            f"The file {name[:100]!r} is UTF-16 ({how}) without a byte-order mark; it was read as such. "
            "Check the text box: save the file as UTF-8 to be sure."
        )
    else:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None, [
                f"The file {name[:100]!r} is not UTF-8 text: save it as plain text (.txt, UTF-8) and upload it again."
            ]
    controls = sorted({f"U+{ord(c):04X}" for c in text if _control(c)})
    if controls:
        return None, [
            f"The file {name[:100]!r} holds control characters ({', '.join(controls[:5])}"
            f"{' …' if len(controls) > 5 else ''}) that plain text does not: save it as plain text "
            "(.txt, UTF-8) and upload it again."
        ]
    text = " ".join(text.split())
    if not text:
        return None, [f"The file {name[:100]!r} holds no text."]
    if len(text) > max_chars:
        notes.append(
            f"The file holds {len(text):,} characters; the text box takes the first {max_chars:,} "
            "(NORMVIZ_MAX_TOKENS × 50), and the analysis is cut at the token limit as for typed text."
        )
        text = text[:max_chars]
    return text, notes


# --- the map picker ---------------------------------------------------------------------------------------


def group_of(key: str) -> str:
    """The picker group of a key (``KeyInfo.group``: Kobayashi et al.'s per-layer maps | maps chained through
    the layers | other methods' per-layer maps)."""
    return keyspace.key_info(key).group


def grouped(keys: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {g: [] for g in GROUPS}
    for k in keys:
        out[group_of(k)].append(k)
    return out


def short_label(key: str) -> str:
    """A label that fits a pill (``KeyInfo.label``); the full title is in the panel."""
    try:
        return keyspace.key_info(key).label
    except NormvizError:
        return key if len(key) <= 22 else key[:21] + "…"


def pill_labels(keys: list[str]) -> dict[str, str]:
    """Each key's pill label (:func:`short_label`), unique among ``keys``: a rollout whose label is also a
    per-layer map's ("ALTI" twice, "value zeroing" twice) says it is the rollout ("ALTI · rollout")."""
    labels = {k: short_label(k) for k in keys}
    seen = Counter(labels.values())
    return {k: f"{lab} · rollout" if seen[lab] > 1 and k.startswith("rollout_") else lab for k, lab in labels.items()}


def dedupe_all_heads(keys: list[str], head: int | None) -> tuple[list[str], str]:
    """With all heads a per-head key is its "all heads" view (:func:`normviz.methods.keyspace.layer_view`: ``norm`` is
    ``norm_layer``, the head vectors summed, then the norm): one panel, and a note saying so. Returns the keys to
    show and the note ("" when nothing was merged)."""
    same = keyspace.same_at_all_heads(keys) if head is None else {}
    if not same:
        return list(keys), ""
    notes = [ALL_HEADS_SAME_NOTES.get(k) or f"{short_label(k)} is {short_label(v)}" for k, v in same.items()]
    return [k for k in keys if k not in same], f"With all heads, {'; '.join(notes)} — so it is shown once."


# how the "all heads" views are said (a key whose view is its own: its labels, :func:`dedupe_all_heads`)
ALL_HEADS_SAME_NOTES = {"norm": "‖α f(x)‖ is the norm of the heads' vectors summed — the same numbers as ‖Σ_h α f(x)‖"}


def all_heads_note(keys: list[str], head: int | None) -> str:
    """What "all heads" means for the per-head maps among ``keys`` (empty when a head is chosen)."""
    if head is not None:
        return ""
    per_head = [k for k in keys if keyspace.key_info(k).per_head]
    if not per_head:
        return ""
    parts = []
    if "attention" in per_head:
        parts.append("α: the mean of the heads' weights")
    viewed = [k for k in per_head if keyspace.layer_view(k) is not None]
    for k in viewed:
        parts.append(
            "‖α f(x)‖: the norm of the heads' vectors summed (= ‖Σ_h α f(x)‖)"
            if k == "norm"
            else f"{short_label(k)}: {short_label(keyspace.layer_view(k))}"
        )
    others = [k for k in per_head if k != "attention" and k not in viewed]
    if others:
        parts.append(", ".join(short_label(k) for k in others) + ": the mean over heads")
    return "All heads, for per-head maps — " + "; ".join(parts) + ". Pick a head to see one."


# --- panel transforms ---------------------------------------------------------------------------------------


def thresholded(matrix: np.ndarray, threshold: float) -> np.ndarray:
    """Cells whose |value| is below ``threshold`` × the largest |value| become NaN (drawn empty)."""
    m = np.asarray(matrix, dtype=np.float64)
    if threshold <= 0 or not np.isfinite(m).any():
        return m
    top = np.nanmax(np.abs(m))
    return np.where(np.abs(m) >= threshold * top, m, np.nan)


def fx_strip(norms: np.ndarray, head: int | None, keep: list[int]) -> tuple[np.ndarray, str]:
    """The ‖f(x_j)‖ strip of the shown tokens from ``normviz.transformed_norms(session, layer)`` ([H, n]):
    of ``head``, or the mean over heads; and its title."""
    norms = np.asarray(norms, dtype=np.float64)
    if head is None:
        return norms.mean(0)[keep], "‖f(x_j)‖, mean over heads"
    return norms[head][keep], f"‖f(x_j)‖, head {head}"


def layer_stack(analysis, key: str, head: int | None, hide_special: bool, values: str) -> tuple[np.ndarray, list[int]]:
    """[L, m, m]: the panel of ``key`` at every layer (as shown: specials hidden, shares), for the layer player."""
    mats, keep = [], list(range(analysis.n_tokens))
    for layer in range(analysis.n_layers):
        m, keep = shown_matrix(analysis.map(key, layer, head), analysis.special, hide_special, values)
        mats.append(m)
    return np.stack(mats), keep


def view_npz_name(model: str, layer: int, head: int | None) -> str:
    return f"normviz_{model.replace('/', '_')}_L{layer}_" + ("all" if head is None else f"H{head}")

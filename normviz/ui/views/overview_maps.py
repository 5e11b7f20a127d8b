"""What the Overview page draws, computed one layer at a time (never the whole [L, H, n, n] arrays).

The grids show every layer and head of a map over the first ``m`` tokens only (``m`` from
:func:`normviz.ui.kit.data.crop_tokens`: 400,000 cells in all), and the no-op-head summary needs one number per
head. Both are made layer by layer from :meth:`normviz.Session.layer_stack` ([H, n, n] of one layer, the same
numbers as that layer of the whole array), each layer cropped or reduced before the next is computed:

    stacks   {key: [L, H, m, m]} (layer-level keys: [L, 1, m, m]), the grids' numbers
    shares   {key: [L, H]}: per head, the mean over receiving tokens i of Σ_{j ∈ sink} |m_ij| / Σ_j |m_ij|
             (:func:`normviz.ui.kit.data.special_share`), for the no-op-head summary (attention against norm)

Peak: one layer's maps and their float64 copy for the shares, instead of L of them (smollm2 at 900 tokens: 29 MB
a layer, not 875 MB a key and 6.8 GB for the page).
"""

from __future__ import annotations

import numpy as np

from ..kit import data


def heads_of(session, key: str) -> int:
    """Heads of ``key``'s grid (1 for a layer-level key), known before computing."""
    shape = session.array_shape(key)
    return int(shape[1]) if len(shape) == 4 else 1


def grid_tokens(session, keys: list[str], limit_cells: int = 400_000) -> int:
    """How many leading tokens the grids of ``keys`` show within ``limit_cells`` heatmap cells."""
    cells = sum(int(session.array_shape(k)[0]) * heads_of(session, k) for k in keys)
    return data.crop_tokens(session.n_tokens, cells, limit_cells=limit_cells)


def layer_bytes(session, keys: list[str]) -> int:
    """Bytes of one layer of every key in ``keys`` (what computing a layer holds at once)."""
    shapes = [session.array_shape(k) for k in keys]
    return int(sum(np.prod(s[1:], dtype=np.int64) for s in shapes)) * session.itemsize


def sink_of(session, causal: bool) -> tuple[np.ndarray, str | None]:
    """The tokens whose share the no-op-head summary reads: the special tokens, else (a decoder without a BOS
    token) the first token, the attention sink; and how to name them (None: no such token)."""
    special = np.asarray(session.encoded.special, bool)
    labels = list(session.labels)
    if special.any():
        return special, ", ".join(sorted({labels[i] for i in np.flatnonzero(special)}))
    if causal and len(special):
        sink = np.zeros(len(special), dtype=bool)
        sink[0] = True
        return sink, f"the first token “{labels[0]}”, the attention sink of a decoder"
    return special, None


def compute(
    session, grid_keys: list[str], m: int, share_keys: list[str], sink: np.ndarray | None, progress=None
) -> tuple[dict, dict, dict]:
    """One pass over the layers: ({key: [L, H, m, m]} of ``grid_keys`` (layer-level keys [L, 1, m, m]),
    {key: [L, H]} shares of ``share_keys`` going to ``sink``, {key: why refused}). A key refused at a layer
    (a cost check, an error of its family) is left out and said; the others go on."""
    from ...core.errors import NormvizError

    keys = list(dict.fromkeys(list(grid_keys) + (list(share_keys) if sink is not None else [])))
    n_layers = max((int(session.array_shape(k)[0]) for k in keys), default=0)
    stacks, shares, refused = {}, {}, {}
    for layer in range(n_layers):
        for k in keys:
            if k in refused or layer >= int(session.array_shape(k)[0]):
                continue
            try:
                part = session.layer_stack(k, layer)
            except NormvizError as exc:
                refused[k] = str(exc)
                continue
            if k in grid_keys:
                if k not in stacks:
                    stacks[k] = np.empty(
                        (int(session.array_shape(k)[0]), part.shape[0], min(m, part.shape[1]), min(m, part.shape[2])),
                        part.dtype,
                    )
                stacks[k][layer] = part[:, :m, :m]
            if sink is not None and k in share_keys:
                shares.setdefault(k, []).append(data.special_share(part[None], sink)[0])
            del part
        if progress:
            progress((layer + 1) / n_layers, f"layer {layer + 1} of {n_layers}")
    stacks = {k: v for k, v in stacks.items() if k not in refused}
    shares = {k: np.stack(v) for k, v in shares.items() if k not in refused}
    return stacks, shares, refused


def overview(session, grid_keys: list[str], m: int, share_keys: list[str], sink: np.ndarray | None, progress=None):
    """:func:`compute`, once per session and arguments (:func:`normviz.ui.kit.memo.memoised`: a rerun of the page
    reads the grids again, it does not recompute every layer)."""
    from ..kit.memo import memoised

    key = ("overview", tuple(grid_keys), int(m), tuple(share_keys), None if sink is None else sink.tobytes())
    return memoised(session, key, lambda: compute(session, grid_keys, m, share_keys, sink, progress))


__all__ = ["compute", "grid_tokens", "heads_of", "layer_bytes", "overview", "sink_of"]

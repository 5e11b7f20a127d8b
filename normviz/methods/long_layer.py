"""One layer's maps of a long input with α streamed in blocks of receiving rows: α [H, n, n] is never whole.

A long input records q, k instead of α (:mod:`normviz.record.attention_capture`); a layer's α is recomputed from them
in blocks of rows (:meth:`AttentionInputs.blocks`, a causal block over its own past only). Every map below is
a function of α's row i and of per-token quantities of j, so each block is used at once and dropped:

    attention (head mean, one head)   α^h_ij averaged over h, or α^h_ij
    norm (one head)                   α^h_ij ‖f^h_j‖
    norm_layer, attn_res, attn_res_ln the norm family's pair sums c_ijᵀ G_j c_ij over the block
                                      (:func:`normviz.methods.norms.compiled.pair_norms_rows`, the Grams of
                                      ``span_grams_packed`` for the whole layer first)

The numbers are those of the whole-α path bit for bit (the same kernels' operations per pair, the same
products; tested). The peak is one block of α (``block_bytes``) and the eager function's temporaries of it,
instead of α and its copies (576 MB each at smollm2's n = 4000); the blocks' temporaries are reused from
glibc's heap meanwhile (:func:`normviz.core.memory.scratch_heap`). Only for the compiled CPU kernels, a layer
whose α is recomputed, and the keys above: :func:`streamable` says when.
"""

from __future__ import annotations

import numpy as np
import torch

from ..core.memory import scratch_heap
from .norms import kernels
from .norms.runs import packed_grams

BLOCK_BYTES = 32 << 20  # α per block of rows
PAIR_KEYS = ("norm_layer", "attn_res", "attn_res_ln")


def streamable(view, wanted: list[tuple[str, object]]) -> bool:
    """Whether :func:`layer_maps` serves ``wanted`` [(base key, take)] on ``view`` (a LayerDecomposition):
    its α is recomputed from q, k (a long input's record), the compiled kernels run here, and every wanted map
    is α's head mean or one head, one head of ``norm``, or a pair key of the layer."""
    rec = view.rec
    if rec.attn is not None or rec.qk is None or not _kernels_serve(view):
        return False
    for base, take in wanted:
        ok = (
            (base == "attention" and take is not None)
            or (base == "norm" and isinstance(take, int))
            or (base in PAIR_KEYS and take is None)
        )
        if not ok:
            return False
    return True


def layer_maps(view, wanted: list[tuple[str, object]], block_bytes: int = BLOCK_BYTES) -> dict:
    """{(base, take): [n, n] numpy array} of ``view``'s layer (see :func:`streamable`), in one pass over α's
    row blocks. ``take``: "mean" or a head index for attention, a head for norm, None for the pair keys."""
    n, dtype = view.n, view.dtype
    npdtype = torch.empty((), dtype=dtype).numpy().dtype
    out = {w: np.empty((n, n), npdtype) for w in wanted}
    kernel = {k: out[(k, None)] for k in PAIR_KEYS if (k, None) in out}
    if ("attention", "mean") in out:
        kernel["mean"] = out[("attention", "mean")]
    heads_norm = [t for b, t in wanted if b == "norm"]
    grams = _grams(view) if heads_norm or set(kernel) - {"mean"} else _no_grams(view)
    unused = np.empty((1, 1), npdtype)
    with scratch_heap(block_bytes + (1 << 20)):  # the blocks' temporaries reused from the heap (the outputs not)
        _stream(view, out, kernel, grams, unused, block_bytes)
    view.workspace.release()
    return out


def _stream(view, out: dict, kernel: dict, grams: dict, unused: np.ndarray, block_bytes: int) -> None:
    """Each block of α's rows through every output (:func:`layer_maps`)."""
    n, dtype = view.n, view.dtype
    for a, b, cols, block in view.rec.attention_inputs().blocks(block_bytes):
        block = block.to(dtype)
        for (base, take), arr in out.items():
            if base == "attention" and take != "mean":
                torch.from_numpy(arr[a:b, :cols]).copy_(block[int(take)])
            elif base == "norm":
                torch.mul(block[int(take)], grams["fnorm"][int(take), :cols], out=torch.from_numpy(arr[a:b, :cols]))
        if kernel:
            a_np = block.numpy() if block.is_contiguous() else block.contiguous().numpy()
            rows = {k: kernel[k][a:b] if k in kernel else unused for k in ("mean",) + PAIR_KEYS}
            if not kernels.run(
                "pair_norms_rows",
                a_np,
                a,
                grams["gram"],
                grams["gx"],
                grams["inv_s"],
                rows["mean"],
                rows["norm_layer"],
                rows["attn_res"],
                rows["attn_res_ln"],
                "mean" in kernel,
                "norm_layer" in kernel,
                "attn_res" in kernel,
                "attn_res_ln" in kernel,
            ):
                raise RuntimeError("the compiled pair kernel could not run")
        if cols < n:
            for arr in out.values():
                arr[a:b, cols:] = 0
        del block


def head_mean(alpha: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """α's mean over heads (dim 0) as (α⁰ + α¹ + … + α^{H−1}) / H, added head by head in α's dtype: elementwise
    operations, so the same numbers whatever block of rows it is taken over (torch's own mean groups its sum
    by the tensor's shape: a float32 α's mean would differ by an ulp between a block and the whole)."""
    if alpha.shape[0] == 1:
        return alpha[0].clone() if out is None else out.copy_(alpha[0])
    out = torch.add(alpha[0], alpha[1], out=out)
    for h in range(2, alpha.shape[0]):
        out += alpha[h]
    return out.div_(alpha.shape[0])


def _kernels_serve(view) -> bool:
    """The compiled path's conditions (``runs.backend``'s, read without touching α): CPU, float32/64, numba."""
    return (
        kernels.available()
        and view.device.type == "cpu"
        and view.dtype in (torch.float32, torch.float64)
        and view.use_kernel is not False
    )


def _no_grams(view) -> dict[str, np.ndarray]:
    """Stand-ins for the Grams when only α's head mean is asked for (the kernel reads none of them)."""
    d = torch.empty((), dtype=view.dtype).numpy().dtype
    return {"gram": np.zeros((2, 4, 4, 1), d), "gx": np.zeros((2, 1, 1), d), "inv_s": np.zeros(1, d)}


def _grams(view) -> dict[str, np.ndarray]:
    """The layer's Grams (plain and under the attention residual's norm), ‖f^h_j‖ and 1/s_j, as the norm family's
    compiled path computes them (:func:`.norms.runs.packed_grams` on f = v W^O per head), for one layer."""
    # f^h = v^h W^O_h (runs._head_vectors; not a workspace buffer: dropped as soon as the Grams are made, before
    # α's blocks, 83 MB at smollm2's n = 4000)
    f = torch.bmm(view.head_values, view.p.head_w_o().to(view.dtype)).unsqueeze(0)
    grams = packed_grams([view], f)
    if grams is None:
        raise RuntimeError("the compiled Gram kernel could not run")
    gram, gx, fnorm, inv_s = grams
    return {"gram": gram[0].numpy(), "gx": gx[0].numpy(), "inv_s": inv_s[0].numpy(), "fnorm": fnorm[0]}


__all__ = ["BLOCK_BYTES", "PAIR_KEYS", "head_mean", "layer_maps", "streamable"]

"""Attention weights α^h_ij, as the model computed them in the recorded pass (Vaswani et al. 2017)."""

from __future__ import annotations

import torch

from ..core import pool
from ..record import alpha_into
from . import papers
from .base import Inputs, KeyInfo, Output, no_check, to_numpy
from .family import Family

check = no_check
FAMILY = Family(
    name="weights",
    order=10,
    keys=(
        KeyInfo("attention", "Attention weights α", True, "α^h_ij, the softmax weights of head h.", short="α weights"),
    ),
    stacks=("model", "encoder", "decoder"),  # also an encoder–decoder's decoder self-attention
    group="per layer",
    unit="weight α",
    per_layer=True,  # compute() serves any subset of layers: Session.map computes one
    record="attention",  # reads only the attention blocks: a pass may stop after the last one (schedule)
    alpha_keys=("attention",),  # its layer map is α: one head or the head mean is taken from the layer view's α
    releases_alpha=True,  # compute() clears each layer's α once copied: other families on the same view run first
    references=(papers.VASWANI_2017,),
)


def compute(inputs: Inputs, keys, options) -> Output:
    """α of the layers asked: the recording pass's own block when it wrote them into one
    (:mod:`normviz.record.alpha_into`: the array is that memory, no copy), else copied into a pooled array."""
    layers = inputs.layers
    c0 = layers[0]
    n = c0.n
    block = alpha_into.block_of([ctx.alpha for ctx in layers]) if c0.rec.attn is not None else None
    if block is not None:
        for ctx in layers:
            ctx.clear()
        return Output({"attention": block.numpy()})
    out = pool.empty(
        (len(layers), c0.rec.n_heads, n, n), to_numpy(torch.empty(0, dtype=c0.dtype)).dtype
    )  # reused blocks
    for index, ctx in enumerate(layers):
        out[index] = to_numpy(ctx.alpha)
        ctx.clear()  # a long input's α is recomputed per layer: one layer's at a time
    return Output({"attention": out})

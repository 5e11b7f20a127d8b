"""Tiny random encoder–decoder models (float64) and a word-level tokenizer for them.

build(arch)            normviz.from_model of a random ``…ForConditionalGeneration`` / ``MarianMTModel``
tokenizer()            a PreTrainedTokenizerFast over WORDS (pad 0, eos 1, unk 2, bos 3), eos appended
save_dir(arch, path)   model + tokenizer saved with save_pretrained (what normviz.load reads)
"""

from __future__ import annotations

import torch

# re-exported under this module's names: the tests import them from here
from tools.tiny import IDS, SPECIALS, VOCAB, WORDS, randomize_weights, tokenizer  # noqa: F401
from tools.tiny import MORE_SEQ2SEQ_ARCHS as MORE_ARCHS  # noqa: F401
from tools.tiny import SEQ2SEQ_ARCHS as ARCHS  # noqa: F401
from tools.tiny import _seq2seq_configs as _configs  # noqa: F401
from tools.tiny import build_seq2seq as build  # noqa: F401
from tools.tiny import raw_seq2seq as raw_model  # noqa: F401
from tools.tiny import save_seq2seq_dir as save_dir  # noqa: F401


# ---------------------------------------------------------------- the model's own vectors and an independent cross_norm
def cross_module(layer):
    """The cross-attention module of a decoder layer, named as each family names it (not from normviz)."""
    return layer.encoder_attn if hasattr(layer, "encoder_attn") else layer.layer[1].EncDecAttention


def _projections(mod):
    return (mod.v_proj, mod.out_proj) if hasattr(mod, "v_proj") else (mod.v, mod.o)


@torch.no_grad()
def model_vectors(lm, src_ids: list[int], tgt_ids: list[int]):
    """(encoder stages, decoder self-attention stages, cross outputs y per layer, model output) of one pass,
    hooked independently of normviz's recording."""
    from normviz.record.encdec.params import decoder_view

    from .vectors import hook_stack, stack_vectors

    dec = decoder_view(lm)
    store: dict = {}
    handles = hook_stack(lm.layers, lm.spec, store, "enc") + hook_stack(
        dec.layers, dec.spec, store, "dec", with_ff=False
    )
    ys: dict = {}
    for i, layer in enumerate(dec.layers):
        handles.append(
            cross_module(layer).register_forward_hook(lambda m, a, o, i=i: ys.__setitem__(i, o[0][0].clone()))
        )
    try:
        out = lm.model(
            input_ids=torch.tensor([src_ids]),
            decoder_input_ids=torch.tensor([tgt_ids]),
            output_attentions=True,
            use_cache=False,
        )
    finally:
        for h in handles:
            h.remove()
    enc = stack_vectors(store, lm.n_layers, out.encoder_attentions, "enc")
    decs = stack_vectors(store, len(dec.layers), out.decoder_attentions, "dec")
    return enc, decs, [ys[i] for i in range(len(dec.layers))], out


@torch.no_grad()
def independent_cross_maps(lm, out, ys, decs) -> dict[str, torch.Tensor]:
    """cross_norm, cross_norm_layer and cross_source_share from the model's weights, its encoder output
    and cross-attention weights (one forward pass's ``out``) and the hooked block outputs ys; residuals
    from the decoder layers' own norms (post-LN: the self-attention norm's output; pre-LN: the input of
    the cross block's norm), hooked here."""
    from normviz.record.encdec.params import decoder_view

    layers = decoder_view(lm).layers
    e = out.encoder_last_hidden_state[0]
    res = {"cross_norm": [], "cross_norm_layer": [], "cross_source_share": []}
    for i, layer in enumerate(layers):
        mod = cross_module(layer)
        v_proj, o_proj = _projections(mod)
        alpha = out.cross_attentions[i][0]  # [H, m, n]
        H = alpha.shape[0]
        v = v_proj(e)  # [n, H*dh]
        dh = v.shape[1] // H
        f = torch.stack([v[:, h * dh : (h + 1) * dh] @ o_proj.weight[:, h * dh : (h + 1) * dh].T for h in range(H)])
        res["cross_norm"].append(alpha * f.norm(dim=-1)[:, None, :])
        res["cross_norm_layer"].append(torch.einsum("hij,hjd->ijd", alpha, f).norm(dim=-1))
        b_o = o_proj.bias if o_proj.bias is not None else torch.zeros_like(ys[i][0])
        c = (ys[i] - b_o).norm(dim=-1)
        r = (decs[i]["ln_out"] if lm.spec.placement == "post" else decs[i]["z"]).norm(dim=-1)
        res["cross_source_share"].append(c / (c + r))
    return {k: torch.stack(v) for k, v in res.items()}

"""One teacher-forced forward pass of an encoder–decoder that records what every map needs.

Encoder input ids s (n tokens), decoder input ids t (m tokens: the decoder start token, then the target
without its last token). Recorded, batch of one:
  encoder  [LayerRecord per encoder layer]   as for an encoder-only model (:mod:`normviz.record.recorder`)
  decoder  [LayerRecord per decoder layer]   the self-attention sub-block: x (layer input), attn (causal α),
                                             z_attn (input of the norm after the self-attention residual),
                                             out (layer output); no z_ff
  cross    [CrossRecord per decoder layer]   the cross-attention block (below)
  memory   [n, d]  e, the encoder's final output (what every cross block's keys and values read)
  predicted  [m]   argmax of the LM head per decoder position (None for a base model without one)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...models.params import get_path
from ..recorder import Hooks, LayerRecord, hook_stack, stack_records
from .params import decoder_view


@dataclass
class CrossRecord:
    """One decoder layer's cross-attention block.

    attn [H, m, n]  α^h_ij of target position i over source token j (the model's ``cross_attentions``)
    v    [n, H·dh]  the value projection's own output on e (b^V included)
    y    [m, d]     the block's attention output Σ_h Σ_j α^h_ij f^h(e_j) + b^O (the attention module's output)
    z    [m, d]     the input of the norm on the cross residual: r_i + y_i, r_i the residual stream entering
                    the block (post-LN: the self-attention block's normed output; pre-LN: its residual sum)
    """

    attn: torch.Tensor
    v: torch.Tensor
    y: torch.Tensor
    z: torch.Tensor

    @property
    def residual(self) -> torch.Tensor:
        """r_i = z_i − y_i, the residual stream entering the cross block."""
        return self.z - self.y


@dataclass
class Seq2SeqRecord:
    encoder: list[LayerRecord]
    decoder: list[LayerRecord]
    cross: list[CrossRecord]
    memory: torch.Tensor
    predicted: list[int] | None


@torch.no_grad()
def record_seq2seq(lm, src_ids: list[int], tgt_ids: list[int]) -> Seq2SeqRecord:
    """Run ``lm`` once on (src_ids, decoder_input_ids=tgt_ids) and record every stack. Passes of several
    threads run at once: the hooks record only this thread's pass (:class:`normviz.record.recorder.Hooks`)."""
    return _record(lm, src_ids, tgt_ids)


def _record(lm, src_ids, tgt_ids) -> Seq2SeqRecord:
    dec = decoder_view(lm)
    cross = lm.spec.cross
    store: dict = {}
    hooks = Hooks(store)
    src = torch.tensor([list(src_ids)], device=lm.device)
    tgt = torch.tensor([list(tgt_ids)], device=lm.device)
    try:
        hook_stack(hooks, lm.layers, lm.spec, "enc")
        hook_stack(hooks, dec.layers, dec.spec, "dec", with_ff=False)
        for i, layer in enumerate(dec.layers):
            hooks.output(get_path(layer, cross.attn), (("x", i), "y"))
            hooks.output(get_path(layer, cross.value), (("x", i), "v"))
            hooks.first_input(get_path(layer, cross.norm_on_residual), (("x", i), "z"))
        decoder = lm.model.get_decoder()
        hooks.output(
            decoder, "dec_final"
        )  # the decoder's final hidden state (after its final norm): the LM head's input
        hooks.install(lm.model)
        out = lm.model(
            input_ids=src,
            attention_mask=torch.ones_like(src),
            decoder_input_ids=tgt,
            output_attentions=True,
            use_cache=False,
        )
    finally:
        hooks.remove()
    n, m = src.shape[1], tgt.shape[1]
    encoder = stack_records(store, lm.layers, out.encoder_attentions, [n], n, "enc")[0]
    final = store.get("dec_final")
    final = getattr(final, "last_hidden_state", final)
    decoder = stack_records(
        store,
        dec.layers,
        out.decoder_attentions,
        [m],
        m,
        "dec",
        final=final if isinstance(final, torch.Tensor) else None,
    )[0]
    if out.cross_attentions is None or len(out.cross_attentions) != len(dec.layers):
        raise RuntimeError(
            "the model returned no cross-attention weights; it must run with attn_implementation='eager'"
        )
    crosses = [
        CrossRecord(
            attn=out.cross_attentions[i][0],
            v=store[(("x", i), "v")][0],
            y=store[(("x", i), "y")][0],
            z=store[(("x", i), "z")][0],
        )
        for i in range(len(dec.layers))
    ]
    logits = getattr(out, "logits", None)
    predicted = logits[0].argmax(-1).tolist() if logits is not None else None
    return Seq2SeqRecord(
        encoder=encoder, decoder=decoder, cross=crosses, memory=out.encoder_last_hidden_state[0], predicted=predicted
    )

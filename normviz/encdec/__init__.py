"""Encoder–decoder models (Marian, BART/mBART, M2M100/NLLB, T5): sessions with a source and a target, the
encoder's and decoder's self-attention maps (``encoder_…``, ``decoder_…``) and the cross-attention maps
(``cross_…``, Kobayashi et al. 2020 §5).

>>> lm = normviz.load("toy-mt")                 # lm.is_encoder_decoder
>>> s = normviz.Session(lm, "source text", target="target text")   # target=None: generated greedily
>>> a = s.get(["cross_attention", "cross_norm"])
>>> a.src_tokens, a.tgt_tokens, a["cross_norm"].shape   # [L_dec, H, len(tgt_tokens), len(src_tokens)]
"""
from .keys import all_keys, default_keys, key_info
from .session import Seq2SeqSession

__all__ = ["Seq2SeqSession", "all_keys", "default_keys", "key_info"]

"""Encoder–decoder models (Marian, BART/mBART, M2M100/NLLB, T5): what is particular to them below the session —
the decoder's view of the model and the cross blocks' weights (:mod:`.params`), the teacher-forced recording
pass (:mod:`.record`), the source and target token axes (:mod:`.target`). Their maps are the families' on the
``encoder`` and ``decoder`` stacks and the ``cross`` family (:mod:`normviz.methods.cross`); the session is
``normviz.Session`` (see :mod:`normviz.methods.keyspace` for the keys).

>>> lm = normviz.load("toy-mt")                 # lm.is_encoder_decoder
>>> s = normviz.Session(lm, "source text", target="target text")   # target=None: generated greedily
>>> a = s.get(["cross_attention", "cross_norm"])
>>> a.src_tokens, a.tgt_tokens, a["cross_norm"].shape   # [L_dec, H, len(tgt_tokens), len(src_tokens)]
"""

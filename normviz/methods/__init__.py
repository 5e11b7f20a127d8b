"""Map families, one module each (see :mod:`normviz.methods.base`). Importing this package registers them.

    weights        attention
    norms          norm, norm_layer, attn_res, attn_res_ln
    feedforward    ff, ff_res, ff_res_ln
    rollouts       rollout_attention, rollout_attn_res, rollout_attn_res_ln, rollout_ff_res, rollout_ff_res_ln,
                   rollout_value_zeroing (opt-in)
    effective      effective_attention
    interactions   alti, rollout_alti
    global_encoder globenc_layer, globenc (post-LN; module globenc)
    maxflow        flow (opt-in)
    zeroing        value_zeroing (opt-in)
    decomposition  decompx (opt-in; module decompx)
"""
from . import decompx, effective, feedforward, globenc, interactions, maxflow, norms, rollouts, weights, zeroing
from .base import Inputs, KeyInfo, Output, Request
from .registry import (all_keys, check, families, family_of, is_opt_in, key_info, lookup, references,
                       register_family, requires)

for _family in (weights, norms, feedforward, rollouts, effective, interactions, globenc, maxflow, zeroing, decompx):
    register_family(_family)

__all__ = ["Inputs", "KeyInfo", "Output", "Request", "all_keys", "check", "families", "family_of", "is_opt_in",
           "key_info", "lookup", "references", "register_family", "requires"]

"""Map families, one module each (see :mod:`normviz.methods.base`). Importing this package registers them.

    weights        attention
    norms          norm, norm_layer, attn_res, attn_res_ln
    feedforward    ff, ff_res, ff_res_ln
    rollouts       rollout_attention, rollout_attn_res, rollout_attn_res_ln, rollout_ff_res, rollout_ff_res_ln,
                   rollout_value_zeroing (opt-in)
    effective      effective_attention
    interactions   alti, rollout_alti
    globenc        globenc_layer, globenc (post-LN; older family name global_encoder)
    maxflow        flow (opt-in)
    zeroing        value_zeroing (opt-in)
    decompx        decompx (opt-in; older family name decomposition)
    cross          cross_attention, cross_norm, cross_norm_layer, cross_source_share (encoder–decoders' cross stack)
    knockout       no map key: attention knockout, Session.knockout (ground truth; its budget and check)
    head_ablation  no map key: head ablation, Session.ablate_heads (ground truth; its budget and check)

Each of these modules declares one frozen record, ``FAMILY = Family(...)`` (:mod:`normviz.methods.family`);
importing this package lists its modules and registers every one that declares a ``FAMILY``, in the records'
``order`` (the order above): no hand-kept list. A family's name is its module's name. Which stacks a key applies
to, its picker group, unit, short label and budget option are on its :class:`KeyInfo` (filled from the family by
:func:`register_family`).
"""

import sys

from .base import GROUPS, Inputs, KeyInfo, Output, Request
from .cost import Budget
from .family import Family
from .registry import (
    FAMILY_ALIASES,
    all_budget_options,
    all_keys,
    base_info,
    budget_option,
    budget_options,
    check,
    computation,
    families,
    family,
    family_of,
    is_key,
    is_opt_in,
    layer_view,
    lookup,
    references,
    register_computation,
    register_family,
    register_package,
    requires,
    unregister_family,
)

register_package(sys.modules[__name__])  # every module here that declares a FAMILY, in its order

from .keyspace import key_info  # noqa: E402 — the one key_info: any spelling (``encoder_norm`` titled by its stack)

__all__ = [
    "FAMILY_ALIASES",
    "GROUPS",
    "Budget",
    "Family",
    "Inputs",
    "KeyInfo",
    "Output",
    "Request",
    "all_budget_options",
    "all_keys",
    "base_info",
    "budget_option",
    "budget_options",
    "check",
    "computation",
    "families",
    "family",
    "family_of",
    "is_key",
    "is_opt_in",
    "key_info",
    "layer_view",
    "lookup",
    "references",
    "register_computation",
    "register_family",
    "register_package",
    "requires",
    "unregister_family",
]

"""The map keys of an encoder–decoder: ``encoder_<key>``, ``decoder_<key>`` and the cross keys.

    encoder_<key>   every key of the registry that applies to the encoder stack (its placement), computed by
                    the same families on the encoder's records: encoder_attention, encoder_norm, …,
                    encoder_ff_res_ln (post-LN), encoder_rollout_attention, encoder_value_zeroing (opt-in) …
    decoder_<key>   the decoder's self-attention (causal): attention, norm, norm_layer, attn_res, attn_res_ln
    cross_…         the cross-attention block (:mod:`normviz.encdec.cross`)

A key that exists but does not apply (``decoder_ff``, ``encoder_ff`` of a gated-GELU T5, an unprefixed
``norm``) is refused per key with :class:`~normviz.errors.NotApplicableError`; an unknown name raises
:class:`~normviz.errors.UnknownMethodError`.
"""
from __future__ import annotations

from .. import methods as registry
from ..activations import check_activation
from ..errors import NotApplicableError, UnknownMethodError
from ..methods.base import KeyInfo
from .cross import KEYS as CROSS_INFO
from .cross import NAMES as CROSS_KEYS

ENCODER, DECODER = "encoder_", "decoder_"
DECODER_KEYS = ("attention", "norm", "norm_layer", "attn_res", "attn_res_ln")
FF_KEYS = ("ff", "ff_res", "ff_res_ln")


def split(key: str) -> tuple[str, str]:
    """``encoder_norm`` → ("encoder", "norm"); ``decoder_norm`` → ("decoder", "norm"); a cross key →
    ("cross", key); anything else → ("", key)."""
    if key in CROSS_KEYS:
        return "cross", key
    for prefix in (ENCODER, DECODER):
        if key.startswith(prefix):
            return prefix[:-1], key[len(prefix):]
    return "", key


def is_key(key: str) -> bool:
    """A name the encoder–decoder key space knows (applicable or not), or a family name with a prefix."""
    stack, base = split(key)
    if stack == "cross":
        return True
    return bool(stack) and (base in registry.all_keys() or base in registry.families())


def default_keys(lm) -> list[str]:
    """Every default (not opt-in) key that applies to this model."""
    enc = [ENCODER + k for k in registry.all_keys(lm.spec.placement, include_opt_in=False)
           if refusal(lm, ENCODER + k) is None]
    return enc + [DECODER + k for k in DECODER_KEYS] + list(CROSS_KEYS)


def all_keys(lm) -> list[str]:
    """Every key that applies to this model, opt-in ones included."""
    enc = [ENCODER + k for k in registry.all_keys(lm.spec.placement) if refusal(lm, ENCODER + k) is None]
    return enc + [DECODER + k for k in DECODER_KEYS] + list(CROSS_KEYS)


def expand(lm, names) -> list[str]:
    """Keys, prefixed family names (``encoder_norms``), ``"all"`` (None: the defaults) → keys, in order.
    Unknown names raise UnknownMethodError; applicability is :func:`refusal`'s."""
    if names is None:
        return default_keys(lm)
    if isinstance(names, str):
        names = [names]
    out: list[str] = []
    for name in names:
        name = name.strip()
        if not name:
            continue
        stack, base = split(name)
        if name == "all":
            out += default_keys(lm)
        elif stack in ("encoder", "decoder") and base in registry.families():
            out += [stack + "_" + i.key for i in registry.families()[base].KEYS
                    if stack == "decoder" and i.key in DECODER_KEYS
                    or stack == "encoder" and lm.spec.placement in i.placements]
        elif is_key(name) or base in registry.all_keys():
            out.append(name)
        else:
            raise UnknownMethodError(f"Unknown map key {name!r} for an encoder–decoder model. Map keys: "
                                     f"{', '.join(all_keys(lm))}.")
    return list(dict.fromkeys(out))


def _ff_reason(lm) -> str | None:
    cache = lm._views.setdefault("ff_reason", {})
    if "r" not in cache:
        cache["r"] = check_activation(lm.layer_params(0).act, gated=lm.spec.ff_kind == "gated")
    return cache["r"]


def refusal(lm, key: str) -> str | None:
    """Why ``key`` does not apply to this encoder–decoder (before any cost check), or None."""
    stack, base = split(key)
    if stack == "":
        return (f"{key!r}: this is an encoder–decoder model; ask for encoder_{key} or decoder_{key} "
                "(or a cross_… key)")
    if stack == "decoder" and base not in DECODER_KEYS:
        return (f"{key!r}: the decoder's maps are its self-attention ({', '.join(DECODER + k for k in DECODER_KEYS)}) "
                "and the cross_… keys")
    if stack == "encoder":
        info = registry.key_info(base)
        if lm.spec.placement not in info.placements:
            return f"{key!r} applies to {'/'.join(info.placements)}-LN models only; this encoder is {lm.spec.placement}-LN"
        chain = _requirements(base)
        reason = _ff_reason(lm) if any(k in FF_KEYS for k in chain) else None
        if reason:
            return f"{key!r} needs the encoder's feed-forward split, which is not available: {reason}"
    return None


def _requirements(key: str) -> list[str]:
    out, todo = [], [key]
    while todo:
        k = todo.pop()
        if k not in out:
            out.append(k)
            todo += list(registry.requires(k))
    return out


def check(lm, key: str) -> None:
    reason = refusal(lm, key)
    if reason:
        raise NotApplicableError(reason + ".")


def key_info(key: str) -> KeyInfo:
    """Title and description of an encoder–decoder key (for pickers and legends)."""
    stack, base = split(key)
    if stack == "cross":
        return next(i for i in CROSS_INFO if i.key == key)
    if not stack:
        raise UnknownMethodError(f"{key!r} is not an encoder–decoder key (encoder_…, decoder_…, cross_…).")
    info = registry.key_info(base)
    return KeyInfo(key, f"{stack.capitalize()}: {info.title}", info.per_head,
                   f"The {stack}'s {'self-attention ' if stack == 'decoder' else ''}map: {info.description}",
                   info.placements)

"""The one key space: a model is a set of stacks, a map key is (stack, key), spelled as the user types it.

    stack     whose layers                                       spelled          e.g.
    model     a self-attention model's one stack                 key              norm, attn_res_ln
    encoder   an encoder–decoder's encoder                       encoder_<key>    encoder_norm
    decoder   its decoder's self-attention (causal)              decoder_<key>    decoder_attn_res_ln
    cross     its cross-attention blocks (rows: decoder tokens,  key (the cross   cross_norm
              columns: encoder tokens)                           family's names)

Which keys a stack offers is each family's (``KeyInfo.stacks``, from the family's STACKS; default model and
encoder): a family registered at run time (:func:`normviz.register_family`) is offered on every stack it
applies to, here and wherever keys are listed. Resolution (names → keys, requirements first), applicability
and the placement message exist only here; every family's own ``check`` runs on the stack's :class:`Request`.
"""

from __future__ import annotations

from typing import Iterable

from ..core.activations import check_activation
from ..core.errors import NotApplicableError, TooCostlyError, UnknownKeyError
from ..models import floor
from ..record.encdec.params import decoder_view
from . import registry
from .base import KeyInfo, Request
from .family import Family

STACKS = ("model", "encoder", "decoder", "cross")
PREFIX = {"model": "", "encoder": "encoder_", "decoder": "decoder_", "cross": ""}


def stacks_of(lm) -> tuple[str, ...]:
    """The stacks of a loaded model, in the order their keys are listed and computed."""
    return ("encoder", "decoder", "cross") if getattr(lm, "is_encoder_decoder", False) else ("model",)


def primary(lm) -> str:
    """The stack whose tokens are ``Session.tokens`` / ``Analysis.tokens``: the model's, or the encoder's."""
    return stacks_of(lm)[0]


class Key(str):
    """A spelled map key, parsed once: ``Key("encoder_norm")`` is the string ``"encoder_norm"`` (a dict key, a file
    name, JSON) that knows its ``stack`` ("encoder") and its stack's own ``name`` ("norm"). :func:`resolve` and
    :func:`spell` return Keys, so :func:`parse` of a resolved key reads two fields instead of parsing again."""

    stack: str
    name: str

    def __new__(cls, spelled: str) -> "Key":
        if type(spelled) is cls:
            return spelled  # type: ignore[return-value]
        return cls.of(*_parse(str(spelled)))

    @classmethod
    def of(cls, stack: str, name: str) -> "Key":
        key = str.__new__(cls, PREFIX[stack] + name)
        key.stack, key.name = stack, name
        return key

    def __reduce__(self):  # another process (the heavy-maps worker) parses it again
        return Key, (str(self),)


def spell(stack: str, key: str) -> Key:
    return Key.of(stack, key)


def parse(name: str) -> tuple[str, str]:
    """``encoder_norm`` → ("encoder", "norm"); ``cross_norm`` → ("cross", "cross_norm"); ``norm`` →
    ("model", "norm"); a :class:`Key`: its two fields. A name no family registers raises UnknownKeyError."""
    if type(name) is Key:
        return name.stack, name.name
    return _parse(name)


def _parse(name: str) -> tuple[str, str]:
    for stack in ("encoder", "decoder"):
        prefix = PREFIX[stack]
        if name.startswith(prefix) and registry.is_key(name[len(prefix) :]):
            return stack, name[len(prefix) :]
    if registry.is_key(name):
        stacks = registry.base_info(name).stacks or ()
        return ("model" if "model" in stacks or "cross" not in stacks else "cross"), name
    raise UnknownKeyError(f"Unknown map key {name!r}. Map keys: {', '.join(all_keys(None, stack=None))}.")


def _family_name(name: str) -> tuple[str | None, Family | None]:
    """(stack or None, family) for a family name, prefixed or not (``encoder_norms``, ``norms``)."""
    for stack in ("encoder", "decoder"):
        prefix = PREFIX[stack]
        if name.startswith(prefix) and registry.family(name[len(prefix) :]) is not None:
            return stack, registry.family(name[len(prefix) :])
    return None, registry.family(name)


def known(name: str) -> bool:
    """A map key, family name or ``"all"`` in any spelling (checked before a model is loaded)."""
    if name == "all" or _family_name(name)[1] is not None:
        return True
    try:
        parse(name)
    except UnknownKeyError:
        return False
    return True


# ---------------------------------------------------------------- the stacks of a loaded model
def stack_model(lm, stack: str):
    """The LoadedModel view whose layers are ``stack``'s (the decoder's view for decoder and cross)."""
    return decoder_view(lm) if stack in ("decoder", "cross") else lm


class Stack:
    """One stack of a loaded model for one input: its name, how its keys are spelled, the model view whose layers
    are its own, its rows (and columns: the encoder's tokens for the cross stack) and the :class:`Request` its
    families' checks read (built once: every check, shape and budget of a ``get()`` reads it)."""

    def __init__(self, lm, name: str, rows: int, cols: int | None = None):
        self.lm, self.name, self.rows, self.cols = lm, name, rows, rows if cols is None else cols
        self.prefix = PREFIX[name]
        self._request: Request | None = None

    def spell(self, key: str) -> Key:
        return Key.of(self.name, key)

    def own(self, spelled: str) -> str:
        """A spelled key of this stack → the stack's own name (``encoder_norm`` → ``norm``)."""
        return spelled[len(self.prefix) :]

    def holds(self, spelled: str) -> bool:
        """Whether a spelled key is one of this stack's."""
        return spelled.startswith(self.prefix) and parse(spelled)[0] == self.name

    @property
    def model(self):
        return stack_model(self.lm, self.name)

    def layer_views(self, records: list, chunk_bytes: int) -> list:
        """Per-layer views of this stack's ``records``, each on its layer's device: a self-attention stack's
        :class:`~normviz.record.decompose.LayerDecomposition` (one shared workspace), the cross stack's
        :class:`~normviz.methods.cross.CrossDecomposition`."""
        from ..record.decompose import LayerDecomposition, Workspace
        from ..record.encdec.params import cross_params
        from .cross import CrossDecomposition

        if self.name == "cross":
            return [CrossDecomposition(rec, cross_params(self.lm, i)) for i, rec in enumerate(records)]
        if floor.is_floor(self.lm.spec):  # no architecture row: α (and x, out) only
            from ..record.floor import layer_views

            return layer_views(self.lm, records, chunk_bytes)
        view, workspace, views = self.model, Workspace(), []
        for i, rec in enumerate(records):
            params = view.layer_params(i)
            views.append(
                LayerDecomposition(
                    rec.to(params.w_out.device), params, index=i, chunk_bytes=chunk_bytes, workspace=workspace
                )
            )
        return views

    @property
    def request(self) -> Request:
        if self._request is None:
            self._request = request_for(self.lm, self.rows, self.name)
        return self._request

    def __repr__(self) -> str:
        return f"Stack({self.name!r}, rows={self.rows}, cols={self.cols})"


def ff_refusal(lm, stack: str) -> str | None:
    """Why ``stack``'s FF block cannot be split exactly (an encoder–decoder's encoder; a self-attention model
    with such an activation is refused at load), or None."""
    if stack != "encoder":
        return None
    cache = lm._views.setdefault("ff_reason", {})
    if "r" not in cache:
        cache["r"] = check_activation(lm.layer_params(0).act, gated=lm.spec.ff_kind == "gated")
    return cache["r"]


def request_for(lm, n_tokens: int, stack: str | None = None) -> Request:
    """What ``stack``'s families know before the forward pass (default: the model's first stack)."""
    stack = stack or primary(lm)
    view = stack_model(lm, stack)
    d, d_ff = view.sizes
    return Request(
        n_tokens=n_tokens,
        n_layers=view.n_layers,
        n_heads=view.n_heads,
        d_model=d,
        d_ff=d_ff,
        placement=view.spec.placement,
        causal=view.spec.causal and stack != "cross",
        gated=view.spec.ff_kind == "gated",
        device=lm.device.type,
        stack=stack,
        ff_refusal=ff_refusal(lm, stack),
    )


def _foreign(lm, stack: str, key: str) -> str:
    """Why a key of a stack this model lacks does not apply."""
    name = spell(stack, key)
    if getattr(lm, "is_encoder_decoder", False):
        if stack == "model":
            return (
                f"{name!r}: this is an encoder–decoder model; ask for encoder_{key} or decoder_{key} (or a cross_… key)"
            )
    return f"{name!r} is a key of encoder–decoder models ({stack} stack); {lm.name!r} has one self-attention stack"


def _not_on_stack(lm, stack: str, key: str, info: KeyInfo) -> str:
    offered = [spell(stack, k) for k in registry.all_keys(stack=stack)]
    return f"{spell(stack, key)!r}: the {stack}'s maps are {', '.join(offered)}" + (
        " and the cross_… keys" if stack == "decoder" else ""
    )


def check(lm, stack: str, key: str, request: Request, options: dict) -> None:
    """Refuse (NotApplicableError, TooCostlyError) ``key`` of ``stack`` before anything runs: the model has
    the stack, the key applies to it, to its placement, and its family's own check passes."""
    info = registry.base_info(key)
    if stack not in stacks_of(lm):
        raise NotApplicableError(_foreign(lm, stack, key) + ".")
    if stack not in (info.stacks or ()):
        raise NotApplicableError(_not_on_stack(lm, stack, key, info) + ".")
    if (why := floor.refusal(lm, key)) is not None:  # the raw-attention floor: α and its rollout only
        raise NotApplicableError(why)
    registry.check(request, key, options)


def requirements(key: str) -> list[str]:
    """``key`` and every key it needs, requirements first."""
    out: list[str] = []

    def add(k: str) -> None:
        if k in out:
            return
        for req in registry.requires(k):
            add(req)
        out.append(k)

    add(key)
    return out


def refusal(lm, name: str, request: Request | None = None, options: dict | None = None) -> str | None:
    """Why ``name`` (a spelled key) would be refused for an input of ``request``'s size (default: 2 tokens,
    i.e. applicability only), itself or a key it needs; None if it would not. Runs nothing."""
    stack, key = parse(name)
    options = options or {}
    for k in requirements(key):
        req = request if request is not None and request.stack == stack else request_for(lm, 2, stack)
        try:
            check(lm, stack, k, req, options)
        except (TooCostlyError, NotApplicableError) as exc:
            return str(exc) if k == key else f"{name!r} needs {spell(stack, k)!r}: {exc}"
    return None


def offered(lm, stack: str, include_opt_in: bool) -> list[str]:
    """The keys of ``stack`` that apply to this model (its placement, the families' applicability), spelled."""
    view = stack_model(lm, stack)
    return [
        spell(stack, k)
        for k in registry.all_keys(view.spec.placement, include_opt_in, stack=stack)
        if refusal(lm, spell(stack, k)) is None
    ]


def all_keys(
    lm=None, *, include_opt_in: bool = True, placement: str | None = None, stack: str | None = "model"
) -> list[str]:
    """With a loaded model: every key it offers (an encoder–decoder's ``encoder_*``, ``decoder_*`` and
    ``cross_*``); without one, the registered keys of a self-attention model (``placement``: of one placement;
    ``stack=None``: of every stack, unprefixed). ``normviz.all_keys("post")`` (a placement) still works."""
    if isinstance(lm, str):
        lm, placement = None, lm
    if lm is None:
        return registry.all_keys(placement, include_opt_in, stack=stack)
    return [k for s in stacks_of(lm) for k in offered(lm, s, include_opt_in)]


def default_keys(lm) -> list[str]:
    """Every default (not opt-in) key that applies to this model: what ``Session.get(None)`` computes."""
    return all_keys(lm, include_opt_in=False)


def resolve(lm, names: Iterable[str] | str | None) -> list[str]:
    """Map keys in any spelling, family names (``norms`` on every stack it applies to, ``encoder_norms``),
    ``"all"`` (None: :func:`default_keys`) → the spelled keys to compute, each after the keys it requires.
    Unknown names raise UnknownKeyError; applicability is :func:`check`'s (per key, later)."""
    if names is None:
        wanted = default_keys(lm)
    else:
        if isinstance(names, str):
            names = [names]
        wanted = []
        for name in names:
            name = name.strip()
            if not name:
                continue
            if name == "all":
                wanted += default_keys(lm)
                continue
            if registry.is_key(name) or any(
                name.startswith(PREFIX[s]) and registry.is_key(name[len(PREFIX[s]) :]) for s in ("encoder", "decoder")
            ):
                wanted.append(name)  # a key first: ``decompx``, ``globenc`` are a family's name and its key
                continue
            stack, family = _family_name(name)
            if family is None:
                parse(name)  # unknown: refused by name
                continue
            for s in [stack] if stack else stacks_of(lm):
                view = stack_model(lm, s) if s in stacks_of(lm) else lm
                wanted += [
                    spell(s, i.key)
                    for i in family.keys
                    if s in (i.stacks or ()) and view.spec.placement in i.placements
                ]
    out: list[str] = []
    for name in wanted:
        stack, key = parse(name)
        for k in requirements(key):
            spelled = spell(stack, k)
            if spelled not in out:
                out.append(spelled)
    return out


def key_info(name: str) -> KeyInfo:
    """The KeyInfo of a spelled key: an encoder's or decoder's key is titled by its stack."""
    stack, key = parse(name)
    info = registry.base_info(key)
    if stack in ("model", "cross"):
        return info
    import dataclasses

    return dataclasses.replace(
        info,
        key=name,
        title=f"{stack.capitalize()}: {info.title}",
        description=f"The {stack}'s {'self-attention ' if stack == 'decoder' else ''}map: {info.description}",
    )


def layer_view(name: str) -> str | None:
    """The "all heads" rule, spelled: the key whose layer map is a per-head key's view of all its heads
    (``norm`` → ``norm_layer``, ``encoder_norm`` → ``encoder_norm_layer``, ``cross_norm`` → ``cross_norm_layer``:
    the heads' vectors summed, then the norm), declared by its family (:attr:`Family.layer_views`); None: the
    head mean (``attention``, per-head keys without one) or a key that is not per head."""
    stack, key = parse(name)
    view = registry.layer_view(key)
    return spell(stack, view) if view is not None else None


def same_at_all_heads(keys: Iterable[str]) -> dict[str, str]:
    """{per-head key: its "all heads" view} for each of ``keys`` whose view is among ``keys`` too: with all heads
    the two are one map (``norm`` and ``norm_layer``), shown once."""
    keys = list(keys)
    return {k: v for k in keys if (v := layer_view(k)) is not None and v in keys}


def unit(name: str, values: str = "raw", br: str = "<br>") -> str:
    """The colour bar's title: what one cell's number is (``values="share"``: rows normalised to 1). ``br``
    breaks it before its parenthesis, so that the bar stays narrow (plotly: ``<br>``)."""
    if values == "share":
        return "share of the row"
    text = key_info(name).unit or ""
    return text.replace(" (", br + "(", 1) if br else text


__all__ = [
    "Key",
    "PREFIX",
    "STACKS",
    "Stack",
    "all_keys",
    "check",
    "default_keys",
    "key_info",
    "known",
    "layer_view",
    "offered",
    "parse",
    "primary",
    "refusal",
    "request_for",
    "requirements",
    "resolve",
    "same_at_all_heads",
    "spell",
    "stack_model",
    "stacks_of",
    "unit",
]

"""Architecture differences as data: one row per model type, naming where a layer's parts live.

Every supported model is one of two shapes:

* ``post`` (BERT family): ``z = x + Attn(x)``; ``h = norm_after_attn(z)``; ``out = norm_after_ff(h + FF(h))``.
* ``pre`` (GPT-2, Llama family): ``z = x + Attn(norm_before_attn(x))``; ``out = z + FF(norm_before_ff(z))``.

and ``pre`` rows name the parts that later decoders add (round 5), each a field read by the recording, the
families and the attributions, never a branch on a model name:

* ``norm_after_attn_out`` / ``norm_after_ff_out``: a norm on a sublayer's output before the residual add
  (Gemma 2/3, OLMo-2): ``z = x + P_a(Attn(·))``, ``out = z + P_f(FF(·))``; ``norm_before_attn`` and
  ``norm_before_ff`` may then be absent (OLMo-2 has none);
* ``norm``: the norm's parameters (:class:`NormSpec`: Gemma's (1 + w) scale, OLMo's LayerNorm without weight);
* ``attn_out_scale`` / ``ff_out_scale``: config fields of constants the sublayers' outputs are multiplied by
  before the residual add (Granite's ``residual_multiplier``);
* ``ff_gate_up_fused``: the gate and up projections are one module whose output is gate | up (Phi-3);
* ``qk_norms``: the q and k norms inside the attention (QK-norm: Gemma 3, OLMo-2, Qwen3), frozen by ``attend``;
* ``readout``: the logits' multipliers and soft-cap (:class:`ReadoutSpec`: Granite, Cohere, Gemma 2).

Paths are relative to one layer module; ``layers`` is relative to the base model. A family that differs
from these rows only in names is one :func:`register_architecture` call away; nothing else in normviz
branches on model types.

Encoder–decoder models (Marian, BART/mBART, M2M100/NLLB, T5) are one row too: the encoder's spec (``layers``
relative to ``model.get_encoder()``), with ``decoder`` the spec of the decoder's self-attention sub-block
(``layers`` relative to ``model.get_decoder()``; its ``norm_on_attn_residual`` is the norm after the
self-attention residual: post-LN ``self_attn_layer_norm``, pre-LN the cross block's input norm) and ``cross``
the cross-attention block's paths (:class:`CrossSpec`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConfigFields:
    """Config attribute names, first present wins (families name the same size differently)."""

    d_model: tuple[str, ...] = ("hidden_size", "n_embd", "dim", "d_model")
    d_ff: tuple[str, ...] = ("intermediate_size", "n_inner", "hidden_dim", "d_ff", "ffn_dim")
    heads: tuple[str, ...] = ("num_attention_heads", "n_head", "n_heads")
    kv_heads: tuple[str, ...] = ("num_key_value_heads",)
    head_dim: tuple[str, ...] = ("head_dim",)
    window: tuple[str, ...] = ("max_position_embeddings", "n_positions")

    @staticmethod
    def get(config, names: tuple[str, ...], default=None):
        for name in names:
            value = getattr(config, name, None)
            if value is not None:
                return value
        return default


@dataclass(frozen=True)
class CrossSpec:
    """The cross-attention block of a decoder layer, paths relative to that layer.

    ``attn`` is the attention module (output[0]: the block's attention output y_i, b^O included); ``value``
    and ``out`` its value and output projections (the value reads the encoder's final output e directly);
    ``norm_on_residual`` the norm whose input is r_i + y_i (post-LN: the norm after the cross residual;
    pre-LN: the FF's input norm)."""

    attn: str
    value: str
    out: str
    norm_on_residual: str


@dataclass(frozen=True)
class NormSpec:
    """How a row's norm modules hold their parameters: the scale is ``offset + weight`` (Gemma's RMSNorm:
    offset 1, the weight initialised at 0), or 1 when the module has no weight (OLMo's LayerNorm); ``eps`` is
    used when the module stores none (OLMo's LayerNorm calls ``F.layer_norm`` with 1e-5)."""

    offset: float = 0.0
    eps: float = 1e-5


@dataclass(frozen=True)
class MoESpec:
    """A mixture-of-experts FF block (transformers' fused experts module: ``gate_up_proj`` [E, 2·F, d] whose
    output is gate | up, ``down_proj`` [E, d, F], called with the router's top-k indices and weights, which are
    recorded: the gates frozen at their real values). ``shared`` a dense gated expert every token goes through,
    ``shared_gate`` a linear module whose sigmoid scales it (Qwen2-MoE). A layer without the experts module is a
    dense FF (the row's ff_in / ff_up / ff_out)."""

    experts: str = "mlp.experts"
    shared: str | None = None
    shared_gate: str | None = None
    # GPT-OSS: gate_up_proj [E, d, 2·F] with gate and up interleaved (columns 0, 2, … and 1, 3, …), biases
    # gate_up_proj_bias [E, 2·F] and down_proj_bias [E, d], and a clamped gate (:class:`ClampedGLU`, its α and limit
    # config fields, the up's offset +1)
    interleaved: bool = False
    glu_alpha: str | None = None
    glu_limit: str | None = None
    up_offset: float = 0.0


@dataclass(frozen=True)
class ReadoutSpec:
    """What the LM head's logits go through besides the final norm and W_U, as config fields (None: absent):
    ``divide_by`` (Granite's ``logits_scaling``: logits = W_U x / m), ``multiply_by`` (Cohere's ``logit_scale``)
    and ``softcap`` (Gemma 2's ``final_logit_softcapping``: logits = c·tanh(z / c))."""

    divide_by: str | None = None
    multiply_by: str | None = None
    softcap: str | None = None


@dataclass(frozen=True)
class ArchSpec:
    family: str  # "bert" | "gpt2" | "llama" | a user's own
    placement: str  # "post" | "pre": where the norms sit relative to the residual
    causal: bool  # decoder (each token sees its prefix) or encoder
    layers: str
    value: str  # value projection, or the fused projection when qkv_layout == "fused_qkv"
    out: str
    norm_kind: str  # "layernorm" | "rmsnorm"
    ff_kind: str  # "mlp" | "gated"
    ff_in: str  # mlp: first linear; gated: gate projection
    ff_out: str
    act: str
    ff_up: str | None = None  # gated only
    norm_before_attn: str | None = None  # pre-LN
    norm_before_ff: str | None = None  # pre-LN
    norm_after_attn: str | None = None  # post-LN
    norm_after_ff: str | None = None  # post-LN
    conv1d: bool = False  # GPT-2 style Conv1D weights [in, out]
    qkv_layout: str = "separate"  # "separate" | "fused_qkv": one projection whose output is q | k | v
    window_offset: str = "none"  # "none" | "pad_plus_one": positions start after pad_token_id (RoBERTa)
    fields: ConfigFields = field(default_factory=ConfigFields)
    decoder: "ArchSpec | None" = None  # encoder–decoders: the decoder's self-attention sub-block
    cross: CrossSpec | None = None  # encoder–decoders: the cross-attention block
    variant_flag: str | None = None  # a config attribute; when true, ``variant`` is the row used instead
    variant: "ArchSpec | None" = None
    # the readout (prediction attribution, normviz.attribution): the norm applied to the last layer's output
    # (relative to the stack's root: base model or decoder), the module of the model with its LM head that maps
    # the final hidden state to logits (relative to that model), and an MLM head's transform in front of the
    # output embeddings (dense, activation, LayerNorm paths relative to that model)
    final_norm: str | None = None
    lm_head: str | None = None
    head_transform: tuple[str, str, str] | None = None
    head_scale_flag: str | None = None  # a config flag: when true the head reads final · d_model**-0.5 (T5)
    # round 5's parts (module docstring)
    norm: NormSpec = field(default_factory=NormSpec)
    norm_after_attn_out: str | None = None  # P_a: a norm on the attention output before the residual add
    norm_after_ff_out: str | None = None  # P_f: a norm on the FF output before the residual add
    ff_block: str = "mlp"  # the FF module: its first input is z when no norm sits in front of the FF
    attn_out_scale: str | None = None  # config field: the attention output × it before the residual add
    ff_out_scale: str | None = None  # config field: the FF output × it before the residual add
    ff_gate_up_fused: bool = False  # ff_in is one module whose output is gate | up (Phi-3)
    qk_norms: tuple[str, str] | None = None  # the q and k norms inside the attention module (QK-norm)
    # parallel blocks (GPT-NeoX with use_parallel_residual, GPT-J, Phi, Cohere): out = x + Attn(N1(x)) + FF(N2(x)),
    # norm_before_ff = N2 (the same module as N1 where they share it); ``attn`` the attention module, whose
    # output o is recorded (z = x + o is then no state of the model, the sum of the residual and the attention)
    parallel: bool = False
    attn: str | None = None
    moe: MoESpec | None = None  # a mixture of experts (its gates recorded and frozen), else a dense FF
    readout: ReadoutSpec = field(default_factory=ReadoutSpec)
    # config values this row cannot analyse exactly: (attribute, why); refused when the attribute is truthy, or,
    # written "!attribute", when it is falsy (e.g. OLMo's clip_qkv clamps v after the recorded projection)
    refuse_when: tuple[tuple[str, str], ...] = ()
    # rows of the same model type chosen by config values (Falcon's layouts): the first whose condition holds
    # replaces this row (:func:`config_holds`: "attr" truthy, "!attr" falsy, "attr=value", joined by "&")
    variants: tuple[tuple[str, "ArchSpec"], ...] = ()
    n_kv_heads: int | None = None  # a fixed number of KV heads (Falcon's multi-query: 1), else read from the config
    # "interface": the attention runs through transformers' attention-function interface (q, k recorded for long
    # inputs, interventions inside it, attend); "inline" (Falcon): the attention module computes it itself, so α is
    # always recorded whole, interventions act on the attention module's mask and W^O's input, and attend reruns q, k
    # from the fused projection itself (``qkv_layout``, ``rotary``)
    attention_call: str = "interface"
    # inline attention only (attend reruns q, k itself, :mod:`normviz.record.inline_qk`): the position encoding q and
    # k get after the split of the fused projection ("rope": rotate-half RoPE with the layer call's
    # ``position_embeddings`` cos, sin; None: none), and call arguments that, when the layer is given a tensor for
    # them, put a term outside q·k into the score, so that attend refuses with the reason (Falcon-RW's ALiBi)
    rotary: str | None = None
    attend_refuse_call: tuple[tuple[str, str], ...] = ()
    # learned attention sinks (GPT-OSS): the attention module's parameter of one sink logit per head, a column of the
    # softmax that no token fills, so α's rows sum to 1 − the sink's share (:func:`normviz.methods.sinks.learned_sinks`)
    attn_sinks: str | None = None

    def __post_init__(self):
        if self.placement == "post":
            roles = ("norm_after_attn", "norm_after_ff")
        elif self.norm_after_attn_out is not None:  # norms after the sublayers: the ones in front are optional
            roles = ()
        else:
            roles = ("norm_before_attn", "norm_before_ff")
        missing = [r for r in roles if getattr(self, r) is None]
        if self.placement not in ("post", "pre") or missing:
            raise ValueError(f"ArchSpec({self.family}): placement {self.placement!r} needs the norms {roles}")

    @property
    def is_encoder_decoder(self) -> bool:
        return self.decoder is not None

    def for_config(self, config) -> "ArchSpec":
        """This row, or its variant when the config sets ``variant_flag`` (T5 v1.1's gated FF)."""
        if self.variant is not None and self.variant_flag and getattr(config, self.variant_flag, False):
            return self.variant
        for condition, spec in self.variants:
            if config_holds(config, condition):
                return spec.for_config(config)
        return self

    @property
    def norm_on_attn_residual(self) -> str | None:
        """The norm applied to z = x + Attn(·): post-LN norm_after_attn, pre-LN norm_before_ff (None: the FF
        reads z itself, OLMo-2)."""
        return self.norm_after_attn if self.placement == "post" else self.norm_before_ff

    @property
    def z_attn_module(self) -> str:
        """The module whose first input is z = x + Attn(·): the norm on it, else the FF block (parallel blocks:
        the FF block, called after the attention; z is x + o there)."""
        if self.parallel:
            return self.ff_block
        return self.norm_on_attn_residual or self.ff_block

    @property
    def norm_on_ff_residual(self) -> str | None:
        """The norm applied after the FF residual (post-LN norm_after_ff); pre-LN models have none."""
        return self.norm_after_ff if self.placement == "post" else None

    @property
    def norm_on_input(self) -> str | None:
        """The norm applied to the layer input before attention (pre-LN norm_before_attn)."""
        return self.norm_before_attn if self.placement == "pre" else None

    def value_columns(self, n_heads: int, n_kv_heads: int, head_dim: int) -> slice:
        """Where the value vectors sit in the output (and weight columns) of the ``value`` module."""
        width = n_kv_heads * head_dim
        if self.qkv_layout == "fused_qkv":  # q | k | v (k and v of n_kv_heads each: Phi-3's GQA)
            start = (n_heads + n_kv_heads) * head_dim
            return slice(start, start + width)
        if self.qkv_layout == "grouped_qkv":  # per KV group: its query heads, then k, then v (Falcon's new layout)
            import torch

            r = n_heads // n_kv_heads
            return torch.cat(
                [
                    torch.arange((g * (r + 2) + r + 1) * head_dim, (g * (r + 2) + r + 2) * head_dim)
                    for g in range(n_kv_heads)
                ]
            )
        if self.qkv_layout == "per_head_qkv":  # per head q_h | k_h | v_h (GPT-NeoX)
            import torch

            return torch.cat([torch.arange((3 * h + 2) * head_dim, (3 * h + 3) * head_dim) for h in range(n_heads)])
        return slice(0, width)

    def qk_columns(self, n_heads: int, n_kv_heads: int, head_dim: int):
        """(q, k): index tensors of the query heads' columns [H·dh] (head by head) and the key heads' [KV·dh] in the
        output of a fused ``value`` module (``qkv_layout`` fused_qkv, grouped_qkv or per_head_qkv)."""
        import torch

        def heads(starts) -> torch.Tensor:
            return torch.cat([torch.arange(s * head_dim, (s + 1) * head_dim) for s in starts])

        if self.qkv_layout == "fused_qkv":  # q | k | v
            return heads(range(n_heads)), heads(range(n_heads, n_heads + n_kv_heads))
        if self.qkv_layout == "grouped_qkv":  # per KV group g: its r query heads, k, v
            r = n_heads // n_kv_heads
            q = [g * (r + 2) + t for g in range(n_kv_heads) for t in range(r)]
            return heads(q), heads(g * (r + 2) + r for g in range(n_kv_heads))
        if self.qkv_layout == "per_head_qkv":  # per head q_h | k_h | v_h
            return heads(3 * h for h in range(n_heads)), heads(3 * h + 1 for h in range(n_heads))
        raise ValueError(f"ArchSpec({self.family}): qkv_layout {self.qkv_layout!r} has no fused q and k")


_BERT = ArchSpec(
    family="bert",
    placement="post",
    causal=False,
    layers="encoder.layer",
    value="attention.self.value",
    out="attention.output.dense",
    norm_after_attn="attention.output.LayerNorm",
    norm_after_ff="output.LayerNorm",
    norm_kind="layernorm",
    ff_kind="mlp",
    ff_in="intermediate.dense",
    ff_out="output.dense",
    act="intermediate.intermediate_act_fn",
    lm_head="cls",
    head_transform=(
        "cls.predictions.transform.dense",
        "cls.predictions.transform.transform_act_fn",
        "cls.predictions.transform.LayerNorm",
    ),
)
_ROBERTA = ArchSpec(**{**_BERT.__dict__, "window_offset": "pad_plus_one", "lm_head": None, "head_transform": None})
_DISTILBERT = ArchSpec(
    family="bert",
    placement="post",
    causal=False,
    layers="transformer.layer",
    value="attention.v_lin",
    out="attention.out_lin",
    norm_after_attn="sa_layer_norm",
    norm_after_ff="output_layer_norm",
    norm_kind="layernorm",
    ff_kind="mlp",
    ff_in="ffn.lin1",
    ff_out="ffn.lin2",
    act="ffn.activation",
)
_GPT2 = ArchSpec(
    family="gpt2",
    placement="pre",
    causal=True,
    layers="h",
    value="attn.c_attn",
    out="attn.c_proj",
    norm_before_attn="ln_1",
    norm_before_ff="ln_2",
    norm_kind="layernorm",
    ff_kind="mlp",
    ff_in="mlp.c_fc",
    ff_out="mlp.c_proj",
    act="mlp.act",
    conv1d=True,
    qkv_layout="fused_qkv",
    final_norm="ln_f",
    lm_head="lm_head",
)
_LLAMA = ArchSpec(
    family="llama",
    placement="pre",
    causal=True,
    layers="layers",
    value="self_attn.v_proj",
    out="self_attn.o_proj",
    norm_before_attn="input_layernorm",
    norm_before_ff="post_attention_layernorm",
    norm_kind="rmsnorm",
    ff_kind="gated",
    ff_in="mlp.gate_proj",
    ff_up="mlp.up_proj",
    ff_out="mlp.down_proj",
    act="mlp.act_fn",
    final_norm="norm",
    lm_head="lm_head",
)


# ---------------------------------------------------------------- round 5: later decoders, rows of parts
_NO_OUT_BIAS = (
    ("attention_bias", "a bias on the attention output before its norm (per-token scale) is not decomposed yet"),
    ("mlp_bias", "a bias on the FF output before its norm is not decomposed yet"),
)
_GEMMA = ArchSpec(**{**_LLAMA.__dict__, "family": "gemma", "norm": NormSpec(offset=1.0)})
_GEMMA2 = ArchSpec(
    **{
        **_GEMMA.__dict__,
        "norm_before_ff": "pre_feedforward_layernorm",
        "norm_after_attn_out": "post_attention_layernorm",
        "norm_after_ff_out": "post_feedforward_layernorm",
        "readout": ReadoutSpec(softcap="final_logit_softcapping"),
        "refuse_when": _NO_OUT_BIAS,
    }
)
_GEMMA3 = ArchSpec(**{**_GEMMA2.__dict__, "qk_norms": ("self_attn.q_norm", "self_attn.k_norm")})
_OLMO = ArchSpec(
    **{
        **_LLAMA.__dict__,
        "family": "olmo",
        "norm_kind": "layernorm",
        "refuse_when": (("clip_qkv", "clip_qkv clamps q, k, v after their projections"),),
    }
)
_OLMO2 = ArchSpec(
    **{
        **_LLAMA.__dict__,
        "family": "olmo2",
        "norm_before_attn": None,
        "norm_before_ff": None,
        "norm_after_attn_out": "post_attention_layernorm",
        "norm_after_ff_out": "post_feedforward_layernorm",
        "qk_norms": ("self_attn.q_norm", "self_attn.k_norm"),
        "refuse_when": _NO_OUT_BIAS,
    }
)
_PHI3 = ArchSpec(
    **{
        **_LLAMA.__dict__,
        "family": "phi3",
        "value": "self_attn.qkv_proj",
        "qkv_layout": "fused_qkv",
        "ff_in": "mlp.gate_up_proj",
        "ff_up": None,
        "ff_gate_up_fused": True,
        "act": "mlp.activation_fn",
    }
)
_STARCODER2 = ArchSpec(
    **{
        **_LLAMA.__dict__,
        "family": "starcoder2",
        "norm_kind": "layernorm",
        "ff_kind": "mlp",
        "ff_in": "mlp.c_fc",
        "ff_up": None,
        "ff_out": "mlp.c_proj",
        "act": "mlp.act",
    }
)
_GRANITE = ArchSpec(
    **{
        **_LLAMA.__dict__,
        "family": "granite",
        "attn_out_scale": "residual_multiplier",
        "ff_out_scale": "residual_multiplier",
        "readout": ReadoutSpec(divide_by="logits_scaling"),
    }
)
_OPT = ArchSpec(
    family="opt",
    placement="pre",
    causal=True,
    layers="decoder.layers",
    value="self_attn.v_proj",
    out="self_attn.out_proj",
    norm_before_attn="self_attn_layer_norm",
    norm_before_ff="final_layer_norm",
    norm_kind="layernorm",
    ff_kind="mlp",
    ff_in="fc1",
    ff_out="fc2",
    act="activation_fn",
    final_norm="decoder.final_layer_norm",
    lm_head="lm_head",
    refuse_when=(("!do_layer_norm_before", "OPT-350m's post-LN layers with projections around the stack"),),
)

_MOE = ArchSpec(**{**_LLAMA.__dict__, "family": "moe", "moe": MoESpec()})
_QWEN2_MOE = ArchSpec(
    **{**_MOE.__dict__, "moe": MoESpec(shared="mlp.shared_expert", shared_gate="mlp.shared_expert_gate")}
)
_GPT_OSS = ArchSpec(
    **{
        **_MOE.__dict__,
        "family": "gpt_oss",
        "moe": MoESpec(interleaved=True, glu_alpha="swiglu_alpha", glu_limit="swiglu_limit", up_offset=1.0),
        "attn_sinks": "self_attn.sinks",
    }
)
_GPT_NEOX = ArchSpec(
    family="gpt_neox",
    placement="pre",
    causal=True,
    layers="layers",
    parallel=True,
    attn="attention",
    value="attention.query_key_value",
    qkv_layout="per_head_qkv",
    out="attention.dense",
    norm_before_attn="input_layernorm",
    norm_before_ff="post_attention_layernorm",
    norm_kind="layernorm",
    ff_kind="mlp",
    ff_in="mlp.dense_h_to_4h",
    ff_out="mlp.dense_4h_to_h",
    act="mlp.act",
    final_norm="final_layer_norm",
    lm_head="lm_head",
    refuse_when=(
        ("!use_parallel_residual", "sequential GPT-NeoX blocks (use_parallel_residual=False) have no row yet"),
    ),
)
_GPTJ = ArchSpec(
    family="gptj",
    placement="pre",
    causal=True,
    layers="h",
    parallel=True,
    attn="attn",
    value="attn.v_proj",
    out="attn.out_proj",
    norm_before_attn="ln_1",
    norm_before_ff="ln_1",
    norm_kind="layernorm",
    ff_kind="mlp",
    ff_in="mlp.fc_in",
    ff_out="mlp.fc_out",
    act="mlp.act",
    final_norm="ln_f",
    lm_head="lm_head",
)
_PHI = ArchSpec(
    family="phi",
    placement="pre",
    causal=True,
    layers="layers",
    parallel=True,
    attn="self_attn",
    value="self_attn.v_proj",
    out="self_attn.dense",
    norm_before_attn="input_layernorm",
    norm_before_ff="input_layernorm",
    norm_kind="layernorm",
    ff_kind="mlp",
    ff_in="mlp.fc1",
    ff_out="mlp.fc2",
    act="mlp.activation_fn",
    final_norm="final_layernorm",
    lm_head="lm_head",
    refuse_when=(("qk_layernorm", "Phi's q/k LayerNorms have no row yet"),),
)
_COHERE = ArchSpec(
    **{
        **_LLAMA.__dict__,
        "family": "cohere",
        "parallel": True,
        "attn": "self_attn",
        "norm_before_ff": "input_layernorm",
        "norm_kind": "layernorm",
        "readout": ReadoutSpec(multiply_by="logit_scale"),
        "refuse_when": (("use_qk_norm", "Cohere's q/k norms have no row yet"),),
    }
)


# Falcon: the attention computed inline (no attention interface); parallel attention + FF reading one LayerNorm
# (Falcon-7B: multi-query, fused q | k | v with one KV head), two (Falcon-40B/180B's new_decoder_architecture: per KV
# group its query heads, k, v), or sequential blocks (parallel_attn=False, Falcon-RW); ALiBi is inside α (recorded)
_FALCON = ArchSpec(
    family="falcon",
    placement="pre",
    causal=True,
    layers="h",
    parallel=True,
    attn="self_attention",
    value="self_attention.query_key_value",
    qkv_layout="per_head_qkv",
    out="self_attention.dense",
    norm_before_attn="input_layernorm",
    norm_before_ff="input_layernorm",
    norm_kind="layernorm",
    ff_kind="mlp",
    ff_in="mlp.dense_h_to_4h",
    ff_out="mlp.dense_4h_to_h",
    act="mlp.act",
    final_norm="ln_f",
    lm_head="lm_head",
    fields=ConfigFields(d_ff=("ffn_hidden_size",), kv_heads=()),
    attention_call="inline",
    rotary="rope",
    attend_refuse_call=(
        (
            "alibi",
            "ALiBi (alibi=True, Falcon-RW) adds c·m_h·j to the score, a bias per key outside q·k that no part of "
            "the residual stream wrote, and replaces the rotary encoding; attend splits rotary rows only",
        ),
    ),
)
_FALCON_MQ = ArchSpec(**{**_FALCON.__dict__, "qkv_layout": "fused_qkv", "n_kv_heads": 1})
_FALCON_NEW = ArchSpec(
    **{
        **_FALCON.__dict__,
        "qkv_layout": "grouped_qkv",
        "fields": ConfigFields(d_ff=("ffn_hidden_size",), kv_heads=("num_kv_heads",)),
    }
)
_FALCON_SEQ = {"parallel": False, "attn": None, "norm_before_ff": "post_attention_layernorm"}
_FALCON = ArchSpec(
    **{
        **_FALCON.__dict__,
        "variants": (
            ("new_decoder_architecture&num_ln_in_parallel_attn=1", _FALCON_NEW),
            (
                "new_decoder_architecture",
                ArchSpec(**{**_FALCON_NEW.__dict__, "norm_before_attn": "ln_attn", "norm_before_ff": "ln_mlp"}),
            ),
            ("!parallel_attn&multi_query", ArchSpec(**{**_FALCON_MQ.__dict__, **_FALCON_SEQ})),
            ("!parallel_attn", ArchSpec(**{**_FALCON.__dict__, **_FALCON_SEQ})),
            ("multi_query", _FALCON_MQ),
        ),
    }
)


# ---------------------------------------------------------------- encoder–decoders
def _seq2seq_fields(stack: str) -> ConfigFields:
    return ConfigFields(
        d_model=("d_model",),
        d_ff=(f"{stack}_ffn_dim",),
        heads=(f"{stack}_attention_heads",),
        kv_heads=(),
        head_dim=(),
        window=("max_position_embeddings",),
    )


def _bart_like(placement: str) -> ArchSpec:
    """Marian and BART (post-LN) or mBART and M2M100/NLLB (pre-LN): the same module names."""
    common = dict(
        value="self_attn.v_proj",
        out="self_attn.out_proj",
        norm_kind="layernorm",
        ff_kind="mlp",
        ff_in="fc1",
        ff_out="fc2",
        act="activation_fn",
        layers="layers",
    )
    if placement == "post":
        enc_norms = dec_norms = dict(norm_after_attn="self_attn_layer_norm", norm_after_ff="final_layer_norm")
        cross_norm = "encoder_attn_layer_norm"
    else:
        enc_norms = dict(norm_before_attn="self_attn_layer_norm", norm_before_ff="final_layer_norm")
        dec_norms = dict(norm_before_attn="self_attn_layer_norm", norm_before_ff="encoder_attn_layer_norm")
        cross_norm = "final_layer_norm"
    decoder = ArchSpec(
        family="bart",
        placement=placement,
        causal=True,
        fields=_seq2seq_fields("decoder"),
        final_norm="layer_norm" if placement == "pre" else None,
        lm_head="lm_head",
        **common,
        **dec_norms,
    )
    cross = CrossSpec(
        attn="encoder_attn", value="encoder_attn.v_proj", out="encoder_attn.out_proj", norm_on_residual=cross_norm
    )
    return ArchSpec(
        family="bart",
        placement=placement,
        causal=False,
        fields=_seq2seq_fields("encoder"),
        decoder=decoder,
        cross=cross,
        final_norm="layer_norm" if placement == "pre" else None,
        **common,
        **enc_norms,
    )


def _t5(gated: bool) -> ArchSpec:
    """T5: pre-RMSNorm, no biases, relative position bias (inside α, which is recorded), d_kv per head; FF
    ReLU (t5) or gated (v1.1, ``is_gated_act``). Encoder block: layer.0 self-attention, layer.1 FF; decoder
    block: layer.0 self-attention, layer.1 cross-attention, layer.2 FF."""
    fields = ConfigFields(
        d_model=("d_model",),
        d_ff=("d_ff",),
        heads=("num_heads",),
        kv_heads=(),
        head_dim=("d_kv",),
        window=("n_positions",),
    )

    def ff(i):
        base = f"layer.{i}.DenseReluDense"
        if gated:
            return dict(
                ff_kind="gated", ff_in=f"{base}.wi_0", ff_up=f"{base}.wi_1", ff_out=f"{base}.wo", act=f"{base}.act"
            )
        return dict(ff_kind="mlp", ff_in=f"{base}.wi", ff_out=f"{base}.wo", act=f"{base}.act")

    common = dict(
        family="t5",
        placement="pre",
        layers="block",
        value="layer.0.SelfAttention.v",
        out="layer.0.SelfAttention.o",
        norm_before_attn="layer.0.layer_norm",
        norm_kind="rmsnorm",
        fields=fields,
    )
    decoder = ArchSpec(
        causal=True,
        norm_before_ff="layer.1.layer_norm",
        final_norm="final_layer_norm",
        lm_head="lm_head",
        head_scale_flag="scale_decoder_outputs",
        **common,
        **ff(2),
    )
    cross = CrossSpec(
        attn="layer.1.EncDecAttention",
        value="layer.1.EncDecAttention.v",
        out="layer.1.EncDecAttention.o",
        norm_on_residual="layer.2.layer_norm",
    )
    return ArchSpec(
        causal=False,
        norm_before_ff="layer.1.layer_norm",
        decoder=decoder,
        cross=cross,
        final_norm="final_layer_norm",
        **common,
        **ff(1),
    )


_T5 = ArchSpec(**{**_t5(False).__dict__, "variant_flag": "is_gated_act", "variant": _t5(True)})

ARCHITECTURES: dict[str, ArchSpec] = {}
FAMILIES: dict[str, list[str]] = {}


def register_architecture(model_type: str, spec: ArchSpec, family_label: str | None = None) -> ArchSpec:
    """Add (or replace) the row of ``model_type`` (a transformers ``config.model_type``).

    ``family_label`` is how the supported-models message groups it (default: the spec's family)."""
    ARCHITECTURES[model_type] = spec
    label = family_label or spec.family
    for types in FAMILIES.values():
        if model_type in types:
            types.remove(model_type)
    FAMILIES.setdefault(label, []).append(model_type)
    return spec


register_architecture("bert", _BERT, "BERT family (post-LN)")
register_architecture(
    "electra", ArchSpec(**{**_BERT.__dict__, "lm_head": None, "head_transform": None}), "BERT family (post-LN)"
)
for _mt in ("roberta", "xlm-roberta", "camembert"):
    register_architecture(_mt, _ROBERTA, "BERT family (post-LN)")
register_architecture("distilbert", _DISTILBERT, "BERT family (post-LN)")
register_architecture("gpt2", _GPT2, "GPT-2 (pre-LN)")
for _mt in ("llama", "mistral", "qwen2"):
    register_architecture(_mt, _LLAMA, "Llama family (pre-RMSNorm, GQA, SwiGLU)")
register_architecture(
    "qwen3",
    ArchSpec(**{**_LLAMA.__dict__, "qk_norms": ("self_attn.q_norm", "self_attn.k_norm")}),
    "Llama family (pre-RMSNorm, GQA, SwiGLU)",
)
register_architecture("gemma", _GEMMA, "Gemma ((1 + w) RMSNorm, GeGLU, embeddings × √d)")
register_architecture("gemma2", _GEMMA2, "Gemma 2/3 (norms before and after each sublayer, soft-caps)")
register_architecture("gemma3_text", _GEMMA3, "Gemma 2/3 (norms before and after each sublayer, soft-caps)")
register_architecture("olmo", _OLMO, "OLMo (LayerNorm without parameters)")
register_architecture("olmo2", _OLMO2, "OLMo-2 (norms after each sublayer, QK-norm)")
register_architecture("phi3", _PHI3, "Phi-3 (fused qkv and gate|up)")
register_architecture("starcoder2", _STARCODER2, "StarCoder2 (pre-LN, LayerNorm, GELU FF)")
register_architecture("granite", _GRANITE, "Granite (Llama with multipliers)")
register_architecture("opt", _OPT, "OPT (pre-LN)")
register_architecture("mixtral", _MOE, "mixtures of experts (router gates frozen at their real values)")
for _mt in ("qwen3_moe", "olmoe"):  # with QK-norm
    register_architecture(
        _mt,
        ArchSpec(**{**_MOE.__dict__, "qk_norms": ("self_attn.q_norm", "self_attn.k_norm")}),
        "mixtures of experts (router gates frozen at their real values)",
    )
register_architecture("gpt_oss", _GPT_OSS, "mixtures of experts (router gates frozen at their real values)")
register_architecture("qwen2_moe", _QWEN2_MOE, "mixtures of experts (router gates frozen at their real values)")
register_architecture("gpt_neox", _GPT_NEOX, "parallel attention + FF (GPT-NeoX/Pythia, GPT-J, Phi, Cohere)")
register_architecture("gptj", _GPTJ, "parallel attention + FF (GPT-NeoX/Pythia, GPT-J, Phi, Cohere)")
register_architecture("phi", _PHI, "parallel attention + FF (GPT-NeoX/Pythia, GPT-J, Phi, Cohere)")
register_architecture("falcon", _FALCON, "Falcon (attention computed inline; parallel or sequential blocks)")
register_architecture("cohere", _COHERE, "parallel attention + FF (GPT-NeoX/Pythia, GPT-J, Phi, Cohere)")
for _mt in ("marian", "bart"):
    register_architecture(_mt, _bart_like("post"), "encoder–decoder, post-LN (Marian, BART)")
for _mt in ("mbart", "m2m_100"):
    register_architecture(_mt, _bart_like("pre"), "encoder–decoder, pre-LN (mBART, M2M100/NLLB)")
for _mt in ("t5", "mt5"):
    register_architecture(_mt, _T5, "encoder–decoder, pre-RMSNorm (T5)")


def config_holds(config, condition: str) -> bool:
    """Whether ``condition`` holds for ``config``: terms joined by "&", each "attr" (truthy), "!attr" (falsy) or
    "attr=value" (its str equals value)."""
    for term in condition.split("&"):
        if "=" in term:
            attr, value = term.split("=", 1)
            if str(getattr(config, attr, None)) != value:
                return False
        elif term.startswith("!"):
            if getattr(config, term[1:], None):
                return False
        elif not getattr(config, term, None):
            return False
    return True


def supported_text() -> str:
    return "; ".join(f"{fam}: {', '.join(types)}" for fam, types in FAMILIES.items() if types)


def unsupported_config_reason(config, spec: ArchSpec) -> str | None:
    """Why a config of a known type still can't be analysed exactly, or None."""
    mt = getattr(config, "model_type", None)
    if spec.is_encoder_decoder:
        return None  # gated FF activations other than SiLU are refused per key (encoder_ff…), not per model
    if getattr(config, "add_cross_attention", False):
        return f"{mt} with cross-attention (an encoder-decoder setup) is not supported"
    # a gated FF's activation is checked on the module itself (normviz.core.activations.check_activation)
    for attr, why in spec.refuse_when:
        value = getattr(config, attr.lstrip("!"), None)
        if (not value) if attr.startswith("!") else bool(value):
            return f"{mt} with {attr.lstrip('!')}={value!r}: {why}"
    if not spec.causal and getattr(config, "is_decoder", False):
        return f"{mt} configured as a decoder is not supported"
    return None

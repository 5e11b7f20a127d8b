"""Architecture differences as data: one row per model type, naming where a layer's parts live.

Every supported model is one of two shapes:

* ``post`` (BERT family): ``z = x + Attn(x)``; ``h = norm_after_attn(z)``; ``out = norm_after_ff(h + FF(h))``.
* ``pre`` (GPT-2, Llama family): ``z = x + Attn(norm_before_attn(x))``; ``out = z + FF(norm_before_ff(z))``.

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
    d_ff: tuple[str, ...] = ("intermediate_size", "n_inner", "hidden_dim", "d_ff")
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

    def __post_init__(self):
        roles = (("norm_after_attn", "norm_after_ff") if self.placement == "post"
                 else ("norm_before_attn", "norm_before_ff"))
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
        return self

    @property
    def norm_on_attn_residual(self) -> str:
        """The norm applied to z = x + Attn(·): post-LN norm_after_attn, pre-LN norm_before_ff."""
        return self.norm_after_attn if self.placement == "post" else self.norm_before_ff

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
        if self.qkv_layout == "fused_qkv":  # q | k | v
            start = 2 * n_heads * head_dim
            return slice(start, start + width)
        return slice(0, width)


_BERT = ArchSpec(
    family="bert", placement="post", causal=False, layers="encoder.layer",
    value="attention.self.value", out="attention.output.dense",
    norm_after_attn="attention.output.LayerNorm", norm_after_ff="output.LayerNorm", norm_kind="layernorm",
    ff_kind="mlp", ff_in="intermediate.dense", ff_out="output.dense", act="intermediate.intermediate_act_fn",
    lm_head="cls", head_transform=("cls.predictions.transform.dense", "cls.predictions.transform.transform_act_fn",
                                   "cls.predictions.transform.LayerNorm"),
)
_ROBERTA = ArchSpec(**{**_BERT.__dict__, "window_offset": "pad_plus_one", "lm_head": None, "head_transform": None})
_DISTILBERT = ArchSpec(
    family="bert", placement="post", causal=False, layers="transformer.layer",
    value="attention.v_lin", out="attention.out_lin",
    norm_after_attn="sa_layer_norm", norm_after_ff="output_layer_norm", norm_kind="layernorm",
    ff_kind="mlp", ff_in="ffn.lin1", ff_out="ffn.lin2", act="ffn.activation",
)
_GPT2 = ArchSpec(
    family="gpt2", placement="pre", causal=True, layers="h",
    value="attn.c_attn", out="attn.c_proj", norm_before_attn="ln_1", norm_before_ff="ln_2", norm_kind="layernorm",
    ff_kind="mlp", ff_in="mlp.c_fc", ff_out="mlp.c_proj", act="mlp.act", conv1d=True, qkv_layout="fused_qkv",
    final_norm="ln_f", lm_head="lm_head",
)
_LLAMA = ArchSpec(
    family="llama", placement="pre", causal=True, layers="layers",
    value="self_attn.v_proj", out="self_attn.o_proj",
    norm_before_attn="input_layernorm", norm_before_ff="post_attention_layernorm", norm_kind="rmsnorm",
    ff_kind="gated", ff_in="mlp.gate_proj", ff_up="mlp.up_proj", ff_out="mlp.down_proj", act="mlp.act_fn",
    final_norm="norm", lm_head="lm_head",
)



# ---------------------------------------------------------------- encoder–decoders
def _seq2seq_fields(stack: str) -> ConfigFields:
    return ConfigFields(d_model=("d_model",), d_ff=(f"{stack}_ffn_dim",), heads=(f"{stack}_attention_heads",),
                        kv_heads=(), head_dim=(), window=("max_position_embeddings",))


def _bart_like(placement: str) -> ArchSpec:
    """Marian and BART (post-LN) or mBART and M2M100/NLLB (pre-LN): the same module names."""
    common = dict(value="self_attn.v_proj", out="self_attn.out_proj", norm_kind="layernorm", ff_kind="mlp",
                  ff_in="fc1", ff_out="fc2", act="activation_fn", layers="layers")
    if placement == "post":
        enc_norms = dec_norms = dict(norm_after_attn="self_attn_layer_norm", norm_after_ff="final_layer_norm")
        cross_norm = "encoder_attn_layer_norm"
    else:
        enc_norms = dict(norm_before_attn="self_attn_layer_norm", norm_before_ff="final_layer_norm")
        dec_norms = dict(norm_before_attn="self_attn_layer_norm", norm_before_ff="encoder_attn_layer_norm")
        cross_norm = "final_layer_norm"
    decoder = ArchSpec(family="bart", placement=placement, causal=True, fields=_seq2seq_fields("decoder"),
                       final_norm="layer_norm" if placement == "pre" else None, lm_head="lm_head",
                       **common, **dec_norms)
    cross = CrossSpec(attn="encoder_attn", value="encoder_attn.v_proj", out="encoder_attn.out_proj",
                      norm_on_residual=cross_norm)
    return ArchSpec(family="bart", placement=placement, causal=False, fields=_seq2seq_fields("encoder"),
                    decoder=decoder, cross=cross, final_norm="layer_norm" if placement == "pre" else None,
                    **common, **enc_norms)


def _t5(gated: bool) -> ArchSpec:
    """T5: pre-RMSNorm, no biases, relative position bias (inside α, which is recorded), d_kv per head; FF
    ReLU (t5) or gated (v1.1, ``is_gated_act``). Encoder block: layer.0 self-attention, layer.1 FF; decoder
    block: layer.0 self-attention, layer.1 cross-attention, layer.2 FF."""
    fields = ConfigFields(d_model=("d_model",), d_ff=("d_ff",), heads=("num_heads",), kv_heads=(),
                          head_dim=("d_kv",), window=("n_positions",))

    def ff(i):
        base = f"layer.{i}.DenseReluDense"
        if gated:
            return dict(ff_kind="gated", ff_in=f"{base}.wi_0", ff_up=f"{base}.wi_1", ff_out=f"{base}.wo",
                        act=f"{base}.act")
        return dict(ff_kind="mlp", ff_in=f"{base}.wi", ff_out=f"{base}.wo", act=f"{base}.act")

    common = dict(family="t5", placement="pre", layers="block", value="layer.0.SelfAttention.v",
                  out="layer.0.SelfAttention.o", norm_before_attn="layer.0.layer_norm", norm_kind="rmsnorm",
                  fields=fields)
    decoder = ArchSpec(causal=True, norm_before_ff="layer.1.layer_norm", final_norm="final_layer_norm",
                       lm_head="lm_head", head_scale_flag="scale_decoder_outputs", **common, **ff(2))
    cross = CrossSpec(attn="layer.1.EncDecAttention", value="layer.1.EncDecAttention.v",
                      out="layer.1.EncDecAttention.o", norm_on_residual="layer.2.layer_norm")
    return ArchSpec(causal=False, norm_before_ff="layer.1.layer_norm", decoder=decoder, cross=cross,
                    final_norm="final_layer_norm", **common, **ff(1))


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
register_architecture("electra", ArchSpec(**{**_BERT.__dict__, "lm_head": None, "head_transform": None}),
                      "BERT family (post-LN)")
for _mt in ("roberta", "xlm-roberta", "camembert"):
    register_architecture(_mt, _ROBERTA, "BERT family (post-LN)")
register_architecture("distilbert", _DISTILBERT, "BERT family (post-LN)")
register_architecture("gpt2", _GPT2, "GPT-2 (pre-LN)")
for _mt in ("llama", "mistral", "qwen2", "qwen3"):  # qwen3's q/k norms only change α, which is recorded
    register_architecture(_mt, _LLAMA, "Llama family (pre-RMSNorm, GQA, SwiGLU)")
for _mt in ("marian", "bart"):
    register_architecture(_mt, _bart_like("post"), "encoder–decoder, post-LN (Marian, BART)")
for _mt in ("mbart", "m2m_100"):
    register_architecture(_mt, _bart_like("pre"), "encoder–decoder, pre-LN (mBART, M2M100/NLLB)")
for _mt in ("t5", "mt5"):
    register_architecture(_mt, _T5, "encoder–decoder, pre-RMSNorm (T5)")


def supported_text() -> str:
    return "; ".join(f"{fam}: {', '.join(types)}" for fam, types in FAMILIES.items() if types)


def unsupported_config_reason(config, spec: ArchSpec) -> str | None:
    """Why a config of a known type still can't be analysed exactly, or None."""
    mt = getattr(config, "model_type", None)
    if spec.is_encoder_decoder:
        return None  # gated FF activations other than SiLU are refused per key (encoder_ff…), not per model
    if getattr(config, "add_cross_attention", False):
        return f"{mt} with cross-attention (an encoder-decoder setup) is not supported"
    if spec.ff_kind == "gated":
        act = getattr(config, "hidden_act", "silu")
        if act not in ("silu", "swish"):
            return f"{mt} with hidden_act={act!r}: gated FF units are decomposed for SiLU only"
    if not spec.causal and getattr(config, "is_decoder", False):
        return f"{mt} configured as a decoder is not supported"
    return None

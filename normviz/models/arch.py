"""Architecture differences as data: one row per model type, naming where a layer's parts live.

Every supported model is one of three shapes:

* ``post`` (BERT family): ``z = x + Attn(x)``; ``h = LN1(z)``; ``out = LN2(h + FF(h))``.
* ``pre`` (GPT-2, Llama family): ``z = x + Attn(LN1(x))``; ``out = z + FF(LN2(z))``.

Paths are relative to one layer module; ``layers`` is relative to the base model.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArchSpec:
    family: str  # "bert" | "gpt2" | "llama"
    placement: str  # "post" | "pre"
    layers: str
    value: str  # value projection, or the fused qkv projection when fused_qkv
    out: str
    norm1: str  # post: norm after attention + residual; pre: norm in front of attention
    norm2: str  # post: norm after FF + residual; pre: norm in front of FF
    norm_kind: str  # "layernorm" | "rmsnorm"
    ff_kind: str  # "mlp" | "gated"
    ff_in: str  # mlp: first linear; gated: gate projection
    ff_out: str
    act: str
    ff_up: str | None = None  # gated only
    conv1d: bool = False  # GPT-2 style Conv1D weights [in, out]
    fused_qkv: bool = False

    @property
    def keys(self) -> tuple[str, ...]:
        base = ("attention", "norm", "norm_layer", "attn_res", "attn_res_ln", "ff", "ff_res")
        return base + (("ff_res_ln",) if self.placement == "post" else ())


_BERT = ArchSpec(
    family="bert", placement="post", layers="encoder.layer",
    value="attention.self.value", out="attention.output.dense",
    norm1="attention.output.LayerNorm", norm2="output.LayerNorm", norm_kind="layernorm",
    ff_kind="mlp", ff_in="intermediate.dense", ff_out="output.dense", act="intermediate.intermediate_act_fn",
)
_DISTILBERT = ArchSpec(
    family="bert", placement="post", layers="transformer.layer",
    value="attention.v_lin", out="attention.out_lin",
    norm1="sa_layer_norm", norm2="output_layer_norm", norm_kind="layernorm",
    ff_kind="mlp", ff_in="ffn.lin1", ff_out="ffn.lin2", act="ffn.activation",
)
_GPT2 = ArchSpec(
    family="gpt2", placement="pre", layers="h",
    value="attn.c_attn", out="attn.c_proj", norm1="ln_1", norm2="ln_2", norm_kind="layernorm",
    ff_kind="mlp", ff_in="mlp.c_fc", ff_out="mlp.c_proj", act="mlp.act", conv1d=True, fused_qkv=True,
)
_LLAMA = ArchSpec(
    family="llama", placement="pre", layers="layers",
    value="self_attn.v_proj", out="self_attn.o_proj",
    norm1="input_layernorm", norm2="post_attention_layernorm", norm_kind="rmsnorm",
    ff_kind="gated", ff_in="mlp.gate_proj", ff_up="mlp.up_proj", ff_out="mlp.down_proj", act="mlp.act_fn",
)

ARCHITECTURES: dict[str, ArchSpec] = {
    "bert": _BERT,
    "roberta": _BERT,
    "xlm-roberta": _BERT,
    "camembert": _BERT,
    "electra": _BERT,
    "distilbert": _DISTILBERT,
    "gpt2": _GPT2,
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "qwen2": _LLAMA,
    "qwen3": _LLAMA,  # q/k norms only change attention weights, which are recorded
}

FAMILIES = {
    "BERT family (post-LN)": ["bert", "roberta", "xlm-roberta", "camembert", "electra", "distilbert"],
    "GPT-2 (pre-LN)": ["gpt2"],
    "Llama family (pre-RMSNorm, GQA, SwiGLU)": ["llama", "mistral", "qwen2", "qwen3"],
}


def supported_text() -> str:
    return "; ".join(f"{fam}: {', '.join(types)}" for fam, types in FAMILIES.items())


def unsupported_config_reason(config) -> str | None:
    """Return why a config of a known type still can't be analysed exactly, or None."""
    mt = getattr(config, "model_type", None)
    if getattr(config, "add_cross_attention", False):
        return f"{mt} with cross-attention (an encoder-decoder setup) is not supported"
    if mt in ("llama", "mistral", "qwen2", "qwen3"):
        act = getattr(config, "hidden_act", "silu")
        if act not in ("silu", "swish"):
            return f"{mt} with hidden_act={act!r}: gated FF units are decomposed for SiLU only"
    if mt in ("bert", "roberta", "xlm-roberta", "camembert", "electra"):
        if getattr(config, "is_decoder", False):
            return f"{mt} configured as a decoder is not supported"
    return None

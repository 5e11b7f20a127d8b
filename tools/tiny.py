"""Tiny randomly initialised models of every supported architecture (float64 by default), for tests,
benchmarks and equivalence checks (``tests/helpers`` re-exports them; benchmarks import them from here).

    build(arch)               a self-attention base model (ARCHS), wrapped by normviz.from_model
    encoded(n) / distinct(n)  token ids without a tokenizer (normviz.core.tokens.Encoded)
    build_seq2seq(arch)       an encoder–decoder (SEQ2SEQ_ARCHS + MORE_SEQ2SEQ_ARCHS) with a word-level tokenizer
    save_seq2seq_dir(arch, p) the same saved with save_pretrained (what normviz.load reads)

Uses only transformers and ``normviz.from_model`` / ``normviz.core.tokens.Encoded`` (``normviz.tokens`` before
round 5), so it also builds the same models for an older normviz (benchmarks/check_restructure_equivalence.py).
"""

from __future__ import annotations

from pathlib import Path

import torch
import transformers as tf

import normviz

try:
    from normviz.core.tokens import Encoded
except ImportError:  # an older normviz (before round 5's folders): the equivalence check's baseline
    from normviz.tokens import Encoded

COMMON = dict(vocab_size=97)


def _configs():
    return {
        "bert": tf.BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            **COMMON,
        ),
        "roberta": tf.RobertaConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=70,
            pad_token_id=1,
            **COMMON,
        ),
        "electra": tf.ElectraConfig(
            embedding_size=24,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            **COMMON,
        ),
        "distilbert": tf.DistilBertConfig(
            dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64, **COMMON
        ),
        "gpt2": tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0, **COMMON),
        "llama": tf.LlamaConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=48,
            max_position_embeddings=64,
            bos_token_id=1,
            eos_token_id=2,
            **COMMON,
        ),
        "mistral": tf.MistralConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,
            intermediate_size=48,
            max_position_embeddings=64,
            bos_token_id=1,
            eos_token_id=2,
            **COMMON,
        ),
        "qwen2": tf.Qwen2Config(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=48,
            max_position_embeddings=64,
            bos_token_id=1,
            eos_token_id=2,
            **COMMON,
        ),
        "qwen3": tf.Qwen3Config(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            intermediate_size=48,
            max_position_embeddings=64,
            bos_token_id=1,
            eos_token_id=2,
            **COMMON,
        ),
    }


def _later_configs():
    """Round 5's decoders (issue 38): one tiny config per model type, each with the parts its row names."""
    small = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=48,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        **COMMON,
    )
    falcon = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        ffn_hidden_size=48,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        **COMMON,
    )
    return {
        "gemma": tf.GemmaConfig(head_dim=8, **small),
        "gemma2": tf.Gemma2Config(
            head_dim=8, final_logit_softcapping=3.0, attn_logit_softcapping=5.0, sliding_window=4, **small
        ),
        "gemma3_text": tf.Gemma3TextConfig(
            head_dim=8, sliding_window=4, sliding_window_pattern=2, final_logit_softcapping=3.0, **small
        ),
        "olmo": tf.OlmoConfig(**small),
        "olmo2": tf.Olmo2Config(**small),
        "phi3": tf.Phi3Config(**small),
        "starcoder2": tf.Starcoder2Config(**small),
        "granite": tf.GraniteConfig(
            embedding_multiplier=2.0, residual_multiplier=0.5, attention_multiplier=0.3, logits_scaling=4.0, **small
        ),
        "opt": tf.OPTConfig(
            vocab_size=97,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            ffn_dim=48,
            max_position_embeddings=64,
            word_embed_proj_dim=32,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        ),
        # parallel attention + FF (partial rotary: a share of each head's dimensions)
        "gpt_neox": tf.GPTNeoXConfig(
            rotary_pct=0.5, use_parallel_residual=True, **{k: v for k, v in small.items() if k != "num_key_value_heads"}
        ),
        "gptj": tf.GPTJConfig(
            n_embd=32,
            n_layer=2,
            n_head=4,
            n_inner=48,
            rotary_dim=4,
            n_positions=64,
            bos_token_id=1,
            eos_token_id=2,
            **COMMON,
        ),
        "phi": tf.PhiConfig(partial_rotary_factor=0.5, **small),
        "cohere": tf.CohereConfig(logit_scale=0.25, **small),
        # Falcon (attention inline): Falcon-40B's new_decoder_architecture (2 KV groups, ln_attn and ln_mlp),
        # Falcon-7B's multi-query parallel block, and Falcon-RW's sequential block with biases and ALiBi
        "falcon": tf.FalconConfig(new_decoder_architecture=True, num_kv_heads=2, **falcon),
        "falcon_mq": tf.FalconConfig(multi_query=True, parallel_attn=True, **{**falcon, "ffn_hidden_size": 40}),
        "falcon_seq": tf.FalconConfig(multi_query=False, parallel_attn=False, bias=True, alibi=True, **falcon),
        # mixtures of experts: 4 experts, 2 chosen per token (qwen2_moe: a shared expert with its sigmoid gate)
        "mixtral": tf.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **small),
        "qwen3_moe": tf.Qwen3MoeConfig(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, head_dim=8, norm_topk_prob=False, **small
        ),
        "olmoe": tf.OlmoeConfig(num_experts=4, num_experts_per_tok=2, **small),
        # GPT-OSS: learned attention sinks, biases everywhere, a clamped gate (limit 1.5 here, so that the clamps
        # bind on some units), sliding windows on every other layer
        "gpt_oss": tf.GptOssConfig(
            num_local_experts=4,
            num_experts_per_tok=2,
            head_dim=8,
            sliding_window=4,
            swiglu_limit=1.5,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            **{**small, "intermediate_size": 24},
        ),
        "qwen2_moe": tf.Qwen2MoeConfig(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, shared_expert_intermediate_size=40, **small
        ),
    }


LATER_ARCHS = list(_later_configs())  # round 5: tests/models/test_arch_parts.py


def config_of(arch: str):
    """The tiny config of ``arch`` (ARCHS or LATER_ARCHS)."""
    configs = _configs()
    return configs[arch] if arch in configs else _later_configs()[arch]


ARCHS = list(_configs())


@torch.no_grad()
def randomize_weights(model) -> None:
    """Weights large enough to make every nonlinearity matter; norm scales around 1."""
    for name, p in model.named_parameters():
        if "norm" in name.lower() and name.endswith("weight"):
            p.normal_(1.0, 0.3)
        elif name.endswith("bias"):
            p.normal_(0.0, 0.3)
        else:
            p.normal_(0.0, 0.35)


def build(arch: str, seed: int = 0, dtype=torch.float64):
    """A random base model of one supported architecture, ready for analysis."""
    config = config_of(arch)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = tf.AutoModel.from_config(config, attn_implementation="eager").to(dtype).eval()
    randomize_weights(model)
    return normviz.from_model(model, None, name=f"tiny-{arch}")


def encoded(n: int = 9, seed: int = 1, vocab: int = 97) -> Encoded:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (n,), generator=g).tolist()
    return Encoded(
        ids=ids, tokens=[f"t{i}" for i in ids], labels=[f"t{i}" for i in ids], special=[False] * n, dropped=0
    )


def distinct(n: int) -> Encoded:
    """n different tokens. (Repeated tokens have equal value vectors at layer 0 of a model without position
    embeddings in the residual stream (Llama), which is a genuine rank deficiency of T.)"""
    ids = list(range(11, 11 + 5 * n, 5))
    return Encoded(
        ids=ids, tokens=[f"t{i}" for i in ids], labels=[f"t{i}" for i in ids], special=[False] * n, dropped=0
    )


def from_ids(ids: list[int]) -> Encoded:
    return Encoded(
        ids=list(ids), tokens=[str(i) for i in ids], labels=[str(i) for i in ids], special=[False] * len(ids), dropped=0
    )


# ---------------------------------------------------------------- encoder–decoders
WORDS = (
    "the a cat dog sat on mat red blue house tree sun moon big small runs sees eats green old new "
    "le la chat chien assis sur tapis rouge bleu maison arbre soleil lune grand petit court voit mange"
).split()
SPECIALS = ["<pad>", "</s>", "<unk>", "<s>"]
VOCAB = len(SPECIALS) + len(WORDS)
IDS = dict(pad_token_id=0, eos_token_id=1, bos_token_id=3, decoder_start_token_id=0, forced_eos_token_id=1)


def _seq2seq_configs():
    bart_like = dict(
        vocab_size=VOCAB,
        d_model=32,
        encoder_layers=2,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=2,
        encoder_ffn_dim=48,
        decoder_ffn_dim=40,
        max_position_embeddings=64,
        **IDS,
    )
    t5 = dict(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=6,
        d_ff=48,
        num_layers=2,
        num_decoder_layers=3,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    return {
        "marian": tf.MarianConfig(activation_function="swish", scale_embedding=True, **bart_like),
        "bart": tf.BartConfig(activation_function="gelu", **bart_like),
        "mbart": tf.MBartConfig(activation_function="gelu", **bart_like),
        "m2m_100": tf.M2M100Config(activation_function="relu", **bart_like),
        "t5": tf.T5Config(feed_forward_proj="relu", **t5),
        "t5_gated": tf.T5Config(feed_forward_proj="gated-gelu", **t5),
    }


SEQ2SEQ_ARCHS = ("marian", "bart", "t5")  # the families every exactness test runs on
MORE_SEQ2SEQ_ARCHS = ("mbart", "m2m_100", "t5_gated")


def raw_seq2seq(arch: str, seed: int = 0, dtype=torch.float64):
    config = _seq2seq_configs()[arch]
    torch.manual_seed(seed)
    model = tf.AutoModelForSeq2SeqLM.from_config(config, attn_implementation="eager").to(dtype).eval()
    randomize_weights(model)
    return model


def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return tf.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        bos_token="<s>",
        model_max_length=64,
    )


def build_seq2seq(arch: str, seed: int = 0, dtype=torch.float64):
    return normviz.from_model(raw_seq2seq(arch, seed, dtype), tokenizer(), name=f"tiny-{arch}")


def save_seq2seq_dir(arch: str, path: Path, seed: int = 0) -> Path:
    model = raw_seq2seq(arch, seed, torch.float32)
    model.save_pretrained(path)
    tokenizer().save_pretrained(path)
    return path

"""Language models from `transformers` configs at tiny sizes: encoders, decoders and encoder-decoders."""

from __future__ import annotations

from typing import Any

import torch

from generators.zoo.spec import Family, InputSpec, mask, tokens
from generators.zoo.torch_entry import TransformersEntry

VOCAB = 96
# What every tiny text config shares: two layers, a hidden size of 32 over four heads.
SMALL: dict[str, Any] = {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                         "intermediate_size": 64, "max_position_embeddings": 64}
TEXT: tuple[InputSpec, ...] = (tokens("input_ids", VOCAB), mask())


class Bert(TransformersEntry):
    name = "bert"
    family = Family.ENCODER
    summary = "BERT encoder with pooler (absolute positions, token types, GELU)"
    parameters = 23392
    inputs = TEXT
    outputs = ("last_hidden_state", "pooler_output")

    def make(self, transformers: Any) -> torch.nn.Module:
        return transformers.BertModel(transformers.BertConfig(**SMALL, type_vocab_size=2))


class Roberta(TransformersEntry):
    name = "roberta"
    family = Family.ENCODER
    summary = "RoBERTa encoder (positions offset past the padding id)"
    parameters = 22592
    inputs = TEXT
    outputs = ("last_hidden_state",)

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.RobertaConfig(**{**SMALL, "max_position_embeddings": 72}, pad_token_id=1)
        return transformers.RobertaModel(config, add_pooling_layer=False)


class DistilBert(TransformersEntry):
    name = "distilbert"
    family = Family.ENCODER
    summary = "DistilBERT encoder (sinusoidal positions off, no token types)"
    parameters = 22272
    inputs = TEXT
    outputs = ("last_hidden_state",)

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                               max_position_embeddings=64)
        return transformers.DistilBertModel(config)


class Albert(TransformersEntry):
    name = "albert"
    family = Family.ENCODER
    summary = "ALBERT encoder (factorized embeddings, one layer's weights shared across layers)"
    parameters = 12768
    inputs = TEXT
    outputs = ("last_hidden_state", "pooler_output")

    def make(self, transformers: Any) -> torch.nn.Module:
        return transformers.AlbertModel(transformers.AlbertConfig(**SMALL, embedding_size=16))


class Gpt2(TransformersEntry):
    name = "gpt2"
    family = Family.DECODER
    summary = "GPT-2 causal decoder with its language-model head (Conv1D projections, tanh GELU)"
    parameters = 30592
    inputs = TEXT
    outputs = ("logits",)
    fixed = {"return_dict": True, "use_cache": False}

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                          bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(config)


class Llama(TransformersEntry):
    name = "llama"
    family = Family.DECODER
    summary = "Llama decoder: rotary embeddings, grouped-query attention (4 heads, 2 KV heads), SwiGLU, RMSNorm"
    parameters = 24736
    inputs = TEXT
    outputs = ("logits",)
    fixed = {"return_dict": True, "use_cache": False}

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.LlamaConfig(**SMALL, num_key_value_heads=2)
        return transformers.LlamaForCausalLM(config)


class Qwen2(TransformersEntry):
    name = "qwen2"
    family = Family.DECODER
    summary = "Qwen2 decoder: rotary embeddings, grouped-query attention with biased QKV projections"
    parameters = 23808
    inputs = TEXT
    outputs = ("logits",)
    fixed = {"return_dict": True, "use_cache": False}

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.Qwen2Config(**SMALL, num_key_value_heads=1)
        return transformers.Qwen2ForCausalLM(config)


class T5(TransformersEntry):
    name = "t5"
    family = Family.ENCODER_DECODER
    summary = "T5 encoder-decoder (relative position buckets, RMS-style layer norm, gated GELU)"
    parameters = 52672
    inputs = (*TEXT, tokens("decoder_input_ids", VOCAB, sequence=5))
    outputs = ("last_hidden_state",)
    fixed = {"return_dict": True, "use_cache": False}

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                       num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
                                       feed_forward_proj="gated-gelu", decoder_start_token_id=0)
        return transformers.T5Model(config)


class Bart(TransformersEntry):
    name = "bart"
    family = Family.ENCODER_DECODER
    summary = "BART encoder-decoder (learned positions, post-norm layers)"
    parameters = 50176
    inputs = (*TEXT, tokens("decoder_input_ids", VOCAB, sequence=5))
    outputs = ("last_hidden_state", "encoder_last_hidden_state")
    fixed = {"return_dict": True, "use_cache": False}

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
                                         encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                         decoder_ffn_dim=64, max_position_embeddings=64)
        return transformers.BartModel(config)


class Whisper(TransformersEntry):
    name = "whisper"
    family = Family.ENCODER_DECODER
    summary = "Whisper speech encoder-decoder (convolutional stem over mel features, sinusoidal encoder positions)"
    parameters = 50432
    inputs = (InputSpec("input_features", (1, 8, 16)), tokens("decoder_input_ids", VOCAB, batch=1, sequence=4))
    outputs = ("last_hidden_state",)
    fixed = {"return_dict": True, "use_cache": False}

    def make(self, transformers: Any) -> torch.nn.Module:
        config = transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=8, d_model=32, encoder_layers=2,
                                            decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                                            encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=8,
                                            max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                            decoder_start_token_id=1)
        return transformers.WhisperModel(config)


ENTRIES = [Bert, Roberta, DistilBert, Albert, Gpt2, Llama, Qwen2, T5, Bart, Whisper]

"""A trained tfm Transformer as a CTranslate2 `TransformerSpec`: the same network, weight for
weight, for CTranslate2's C++ inference engine (ctranslate2 >= 4.5).

What is carried over, each as tfm's own modules do it:
- §3.1 layers: post-norm LayerNorm(x + Sublayer(x)) or pre-norm x + Sublayer(LayerNorm(x)) with
  the stacks' final LayerNorm; the LayerNorm epsilon of tfm's modules (PyTorch's 1e-5, not
  CTranslate2's default 1e-6).
- §3.2.2 attention: `w_qkv` rows are W^Q, W^K, W^V, which is CTranslate2's fused layout for
  self-attention; cross-attention takes W^Q alone and W^K, W^V fused.
- §3.3 feed-forward: ReLU, or GELU in its exact (erf) form, as `F.gelu`.
- §3.4 embeddings times sqrt(d_model), shared between source and target when they are one
  matrix, and the output projection tied to the target embedding (CTranslate2 stores a tensor
  that appears twice once).
- §3.5 the model's own sinusoidal table, set explicitly: CTranslate2's built-in table puts all
  sines before all cosines, where tfm interleaves them.

The vocabularies are tfm's token strings in id order, so that string -> id is the identity
mapping; the special tokens keep their fixed ids (<pad> 0, <s> 1, </s> 2, <unk> 3), the decoder
starts from <s> (tfm's BOS) and CTranslate2 appends </s> to each source, as tfm frames sources.
"""

from __future__ import annotations

from collections import Counter
from typing import cast

import ctranslate2
import torch
from ctranslate2.specs import common_spec, transformer_spec
from torch import nn

from tfm.data.tokenizer import BOS_ID, EOS_ID, UNK_ID, Tokenizer
from tfm.errors import UsageError
from tfm.transformer import MultiHeadAttention, Transformer
from tfm.transformer.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, Residual

ACTIVATIONS = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU}

# model_args keys whose value changes only training: any value exports.
TRAINING_ONLY = ("dropout", "attention_dropout", "activation_dropout")
# model_args keys whose value the spec reproduces (sizes, choices CTranslate2 has).
CONVERTED = (
    "src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_encoder_layers",
    "n_decoder_layers", "d_ff", "activation", "norm_position", "share_embeddings", "tie_output",
    "max_len", "pad_id",
)  # fmt: skip


def check_representable(model_args: dict) -> None:
    """Refuse, with a one-line UsageError naming it, any model option this converter does not
    know how to reproduce exactly (an option added to tfm after it, say)."""
    unknown = sorted(set(model_args) - set(TRAINING_ONLY) - set(CONVERTED))
    if unknown:
        values = ", ".join(f"{key}={model_args[key]!r}" for key in unknown)
        raise UsageError(
            f"cannot export to CTranslate2: model option(s) {values} have no CTranslate2 "
            "equivalent in this exporter"
        )
    if model_args["activation"] not in ACTIVATIONS:
        raise UsageError(
            f"cannot export to CTranslate2: model.activation={model_args['activation']!r} is "
            f"not one of {sorted(ACTIVATIONS)}"
        )


def token_strings(tokenizer: Tokenizer) -> tuple[list[str], list[str]]:
    """The source and target vocabularies as token strings in id order. Refuses a vocabulary
    where two ids share one string: CTranslate2 looks tokens up by string, so it could not tell
    them apart."""
    sides = []
    for side, size, pieces in (
        ("source", tokenizer.src_vocab_size, tokenizer.src_pieces),
        ("target", tokenizer.tgt_vocab_size, tokenizer.tgt_pieces),
    ):
        tokens = pieces(range(size))
        twice = [token for token, count in Counter(tokens).items() if count > 1]
        if twice:
            raise UsageError(
                f"cannot export to CTranslate2: the {side} vocabulary has token string(s) "
                f"{twice[:3]} under more than one id; CTranslate2 maps tokens by string"
            )
        sides.append(tokens)
    return sides[0], sides[1]


def layer_norm_epsilon(model: Transformer) -> float:
    """The epsilon of every LayerNorm in the model (CTranslate2 has one for all of them)."""
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    epsilons = sorted({m.eps for m in norms})
    if len(epsilons) != 1 or not all(m.elementwise_affine and m.bias is not None for m in norms):
        raise UsageError(
            f"cannot export to CTranslate2: its LayerNorms need one epsilon and a scale and "
            f"bias each, found epsilons {epsilons}"
        )
    return epsilons[0]


def build_spec(model: Transformer, tokenizer: Tokenizer, model_args: dict):
    """The `TransformerSpec` of `model` (weights still tfm's tensors, float32), with its
    vocabularies and configuration: what `TfmConverter._load` returns."""
    check_representable(model_args)
    src_tokens, tgt_tokens = token_strings(tokenizer)
    spec = transformer_spec.TransformerSpec.from_config(
        (len(model.encoder.layers), len(model.decoder.layers)),
        model_args["n_heads"],
        pre_norm=model_args["norm_position"] == "pre",
        activation=ACTIVATIONS[model_args["activation"]],
    )
    config = spec.config
    config.layer_norm_epsilon = layer_norm_epsilon(model)
    config.bos_token, config.eos_token = tgt_tokens[BOS_ID], tgt_tokens[EOS_ID]
    config.unk_token, config.decoder_start_token = tgt_tokens[UNK_ID], tgt_tokens[BOS_ID]
    config.add_source_bos, config.add_source_eos = False, True  # sources are ids + EOS
    _set_stack(spec.encoder, model, model.encoder)
    (source_embeddings,) = spec.encoder.embeddings  # one source input (no factors)
    source_embeddings.weight = _tensor(model.src_embedding.weight)
    _set_stack(spec.decoder, model, model.decoder)
    spec.decoder.embeddings.weight = _tensor(model.tgt_embedding.weight)
    spec.decoder.projection.weight = _tensor(model.output_projection.weight)  # (V, D), no bias
    spec.register_source_vocabulary(src_tokens)
    spec.register_target_vocabulary(tgt_tokens)
    return spec


def _set_stack(spec, model: Transformer, stack: Encoder | Decoder) -> None:
    """Embedding scale, position table, layers and final norm of the encoder or decoder."""
    spec.scale_embeddings = True  # §3.4: times sqrt(d_model), before the positions are added
    spec.position_encodings.encodings = _tensor(model.positional_encoding.table)  # (max_len, D)
    if stack.final_norm is not None:
        _set_norm(spec.layer_norm, stack.final_norm)
    layers = [cast(EncoderLayer | DecoderLayer, layer) for layer in stack.layers]
    for layer_spec, layer in zip(spec.layer, layers, strict=True):
        _set_attention(
            layer_spec.self_attention,
            layer.self_attention,
            layer.self_attention_residual,
            fused_query=True,
        )
        if isinstance(layer, DecoderLayer):
            _set_attention(
                layer_spec.attention,
                layer.cross_attention,
                layer.cross_attention_residual,
                fused_query=False,
            )
        _set_norm(layer_spec.ffn.layer_norm, layer.feed_forward_residual.norm)
        feed_forward = layer.feed_forward
        _set_linear(layer_spec.ffn.linear_0, feed_forward.w_1.weight, feed_forward.w_1.bias)
        _set_linear(layer_spec.ffn.linear_1, feed_forward.w_2.weight, feed_forward.w_2.bias)


def _set_attention(
    spec, attention: MultiHeadAttention, residual: Residual, *, fused_query: bool
) -> None:
    """Self-attention: one (3D, D) projection; cross-attention: W^Q (D, D), then W^K W^V
    (2D, D) applied to the memory."""
    D = attention.d_model
    weight, bias = attention.w_qkv.weight, attention.w_qkv.bias
    if fused_query:
        _set_linear(spec.linear[0], weight, bias)
    else:
        _set_linear(spec.linear[0], weight[:D], None if bias is None else bias[:D])
        _set_linear(spec.linear[1], weight[D:], None if bias is None else bias[D:])
    _set_linear(spec.linear[-1], attention.w_o.weight, attention.w_o.bias)
    _set_norm(spec.layer_norm, residual.norm)


def _set_linear(spec, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    spec.weight = _tensor(weight)  # (out, in), as nn.Linear stores it
    if bias is not None:
        spec.bias = _tensor(bias)


def _set_norm(spec, norm: nn.LayerNorm) -> None:
    spec.gamma = _tensor(norm.weight)
    spec.beta = _tensor(norm.bias)


def _tensor(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float32).contiguous()


class TfmConverter(ctranslate2.converters.Converter):
    """`ctranslate2.converters.Converter` for a loaded tfm model: `convert(output_dir,
    quantization=..., force=...)` writes model.bin, config.json and the vocabularies."""

    def __init__(self, model: Transformer, tokenizer: Tokenizer, model_args: dict) -> None:
        self._model, self._tokenizer, self._model_args = model, tokenizer, model_args

    def _load(self):
        return build_spec(self._model, self._tokenizer, self._model_args)

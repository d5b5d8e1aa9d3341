"""Helpers for the transformer tests: weight copying for the parity tests (PyTorch's masks say
True = may NOT attend; ours say True = may attend)."""

import torch
from torch import Tensor, nn

from tfm.transformer import DecoderLayer, EncoderLayer, MultiHeadAttention


def randomize(module: nn.Module, *, seed: int = 0) -> nn.Module:
    """Give every parameter (biases and LayerNorm gains included) a non-trivial value, so that a
    forgotten copy cannot go unnoticed."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.rand(parameter.shape, generator=generator) * 0.6 - 0.3)
    return module


@torch.no_grad()
def copy_attention(ours: MultiHeadAttention, reference: nn.MultiheadAttention) -> None:
    ours.w_qkv.weight.copy_(reference.in_proj_weight)
    ours.w_qkv.bias.copy_(reference.in_proj_bias)
    ours.w_o.weight.copy_(reference.out_proj.weight)
    ours.w_o.bias.copy_(reference.out_proj.bias)


@torch.no_grad()
def copy_linear(ours: nn.Module, reference: nn.Module) -> None:
    ours.weight.copy_(reference.weight)
    ours.bias.copy_(reference.bias)


def copy_encoder_layer(ours: EncoderLayer, reference: nn.TransformerEncoderLayer) -> None:
    copy_attention(ours.self_attention, reference.self_attn)
    copy_linear(ours.feed_forward.w_1, reference.linear1)
    copy_linear(ours.feed_forward.w_2, reference.linear2)
    copy_linear(ours.self_attention_residual.norm, reference.norm1)
    copy_linear(ours.feed_forward_residual.norm, reference.norm2)


def copy_decoder_layer(ours: DecoderLayer, reference: nn.TransformerDecoderLayer) -> None:
    copy_attention(ours.self_attention, reference.self_attn)
    copy_attention(ours.cross_attention, reference.multihead_attn)
    copy_linear(ours.feed_forward.w_1, reference.linear1)
    copy_linear(ours.feed_forward.w_2, reference.linear2)
    copy_linear(ours.self_attention_residual.norm, reference.norm1)
    copy_linear(ours.cross_attention_residual.norm, reference.norm2)
    copy_linear(ours.feed_forward_residual.norm, reference.norm3)


def causal_for_reference(length: int) -> Tensor:
    """PyTorch's float causal mask: -inf above the diagonal."""
    return nn.Transformer.generate_square_subsequent_mask(length)

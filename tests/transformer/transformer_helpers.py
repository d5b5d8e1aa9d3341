"""Helpers for the transformer tests: weight copying for the parity tests (PyTorch's masks say
True = may NOT attend; ours say True = may attend), and the uncached reference decoder."""

import torch
from torch import Tensor, nn

from tfm.transformer import (
    DecoderLayer,
    EncoderLayer,
    MultiHeadAttention,
    Transformer,
)
from tfm.transformer.decoding import LengthLimit, output_limits


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


@torch.inference_mode()
def greedy_decode_uncached(
    model: Transformer,
    src_ids: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    limit: LengthLimit,
) -> list[list[int]]:
    """The reference for `greedy_decode`'s tokens: the same search with no cache and no batch
    bookkeeping. Every step re-runs the decoder over each sentence's whole prefix (cross-attention
    keys and values recomputed too), all sentences together until each has ended; then each is
    cut at its first EOS or its length limit."""
    limits = output_limits(model, src_ids, limit).tolist()
    memory = model.encode(src_ids)  # (B, S, D)
    prefix = src_ids.new_full((src_ids.size(0), 1), bos_id)  # (B, 1 + t)
    ended = [False] * src_ids.size(0)
    while not all(ended):
        next_ids = model.decode(prefix, memory, src_ids)[:, -1].argmax(dim=-1)  # (B,)
        prefix = torch.cat([prefix, next_ids[:, None]], dim=1)  # (B, 2 + t)
        t = prefix.size(1) - 1  # tokens generated so far
        new = next_ids.tolist()
        ended = [e or t >= n or i == eos_id for e, n, i in zip(ended, limits, new, strict=True)]
    tokens = []
    for ids, limit in zip(prefix[:, 1:].tolist(), limits, strict=True):
        ids = ids[:limit]
        tokens.append(ids[: ids.index(eos_id)] if eos_id in ids else ids)
    return tokens

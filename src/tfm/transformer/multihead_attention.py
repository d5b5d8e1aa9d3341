"""§3.2 Attention: scaled dot-product attention (§3.2.1, eq. 1) and multi-head attention (§3.2.2).

Masks follow the one tfm convention: boolean, True = this query may attend to this key,
broadcastable to (B, H, Tq, Tk). `None` means "attend everywhere", which lets the fused kernel
skip the mask. A packed batch (one sequence of sentences laid end to end, `packing.py`) has a
`PackedMask` instead, which confines each query to its own sentence.

Deviation from §3.2.1: a query whose keys are all masked gets an all-zero output (and all-zero
weights) instead of the NaN a plain softmax over only -inf would give. This happens only for a
source made entirely of padding.
"""

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tfm.transformer.packing import PackedMask

# What may restrict attention: a boolean mask, or a packed batch's sentences.
AttentionMask = Tensor | PackedMask


class KeyValue(NamedTuple):
    """Keys and values of one attention sublayer, split into heads."""

    keys: Tensor  # (B, H, Tk, K)
    values: Tensor  # (B, H, Tk, K)


@dataclass(frozen=True)
class KeyValueCache:
    """Self-attention keys and values of the positions decoded so far, for inference.

    They live in buffers with room for `capacity` positions, so that a decoding step writes one
    position instead of copying the whole history (and allocating a new tensor) each time.
    `append` returns a new cache that shares the buffers: the old one still reads its own
    `length` positions correctly, but must not be appended to again; `select` copies, and is the
    way to branch (beam search).
    """

    buffers: KeyValue  # (B, H, capacity, K) each
    length: int

    @staticmethod
    def empty(like: Tensor, *, batch: int, n_heads: int, capacity: int) -> "KeyValueCache":
        """An empty cache with the dtype and device of `like` (..., K)."""
        shape = (batch, n_heads, capacity, like.size(-1))
        return KeyValueCache(KeyValue(like.new_empty(shape), like.new_empty(shape)), 0)

    @property
    def capacity(self) -> int:
        return self.buffers.keys.size(2)

    def keys_values(self) -> KeyValue:
        """The cached positions, as views: (B, H, length, K) each."""
        keys, values = self.buffers
        return KeyValue(keys[:, :, : self.length], values[:, :, : self.length])

    def append(self, keys: Tensor, values: Tensor) -> "KeyValueCache":
        """Add keys and values (B, H, T, K) of T new positions; the buffers double when full
        (and take the keys' dtype, e.g. bfloat16 under autocast)."""
        end = self.length + keys.size(2)
        buffers = self.buffers
        if end > self.capacity or buffers.keys.dtype != keys.dtype:
            capacity = self.capacity if end <= self.capacity else max(end, 2 * self.capacity)
            grown = KeyValueCache.empty(
                keys, batch=keys.size(0), n_heads=keys.size(1), capacity=capacity
            )
            for old, new in zip(self.keys_values(), grown.buffers, strict=True):
                new[:, :, : self.length] = old
            buffers = grown.buffers
        buffers.keys[:, :, self.length : end] = keys
        buffers.values[:, :, self.length : end] = values
        return KeyValueCache(buffers, end)

    def select(self, index: Tensor) -> "KeyValueCache":
        """Keep the rows `index` (N,) long, in that order: a copy, of the filled positions only."""
        keys, _ = self.buffers
        selected = KeyValueCache.empty(
            keys, batch=index.numel(), n_heads=keys.size(1), capacity=self.capacity
        )
        for old, new in zip(self.keys_values(), selected.buffers, strict=True):
            torch.index_select(old, 0, index, out=new[:, :, : self.length])
        return KeyValueCache(selected.buffers, self.length)


def causal_mask(query_len: int, key_len: int, *, device: torch.device | None = None) -> Tensor:
    """§3.2.3 masked self-attention: query i (the last `query_len` of `key_len` positions) may
    attend to keys 0..i. Aligned bottom-right, so it also serves a step that appends queries to a
    cache of earlier keys. Returns (Tq, Tk) bool, True = may attend."""
    ones = torch.ones(query_len, key_len, dtype=torch.bool, device=device)
    return ones.tril(diagonal=key_len - query_len)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    mask: AttentionMask | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Eq. (1): softmax(Q K^T / sqrt(d_k)) V.

    query (B, H, Tq, K), key and value (B, H, Tk, K); mask bool broadcastable to (B, H, Tq, Tk),
    True = may attend; `is_causal` adds the causal mask (bottom-right aligned). Returns the output
    (B, H, Tq, K) and, when `need_weights`, the weights (B, H, Tq, Tk), else None. With a
    `PackedMask`, B is 1 and Tq, Tk count the packed tokens (`packed_attention`).

    Without `need_weights` this goes through `F.scaled_dot_product_attention`, which on CPU uses a
    fused kernel when dropout_p is 0; with it, through the explicit matmul/softmax/matmul path.
    Both give the same output. Training in bfloat16 on the CPU runs the fused kernel in float32
    (then rounds its output to bfloat16): its bfloat16 backward is several times slower there.
    """
    if isinstance(mask, PackedMask):
        if need_weights:
            raise ValueError("attention weights of a packed batch are not available; pad it")
        return packed_attention(query, key, value, mask, is_causal=is_causal, dropout_p=dropout_p)
    if not need_weights:
        if is_causal and (mask is not None or query.size(-2) != key.size(-2)):
            # SDPA's own is_causal is aligned top-left and cannot be combined with a mask.
            mask = _with_causal(mask, query.size(-2), key.size(-2), query.device)
            is_causal = False
        if _bf16_backward_on_cpu(query):
            # PyTorch's CPU kernel runs 4-6x slower backwards in bfloat16 than in float32; autocast
            # would cast float32 inputs back to bfloat16, hence off for this call.
            with torch.autocast("cpu", enabled=False):
                out = F.scaled_dot_product_attention(
                    query.float(), key.float(), value.float(), attn_mask=mask,
                    dropout_p=dropout_p, is_causal=is_causal,
                )  # fmt: skip
            return out.to(torch.bfloat16), None
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal
        )
        return out, None
    if is_causal:
        mask = _with_causal(mask, query.size(-2), key.size(-2), query.device)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (B, H, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        # A row of only -inf softmaxes to NaN; such a query attends to nothing.
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    attended = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return attended @ value, weights  # (B, H, Tq, K)


def packed_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: PackedMask,
    *,
    is_causal: bool,
    dropout_p: float,
) -> tuple[Tensor, None]:
    """Attention of a packed batch: query (1, H, N, K), key and value (1, H, M, K) -> (1, H, N, K).

    On a CUDA GPU through the variable-length kernels; elsewhere through the padded layout with
    the padded batch's own masks (none for causal self-attention: targets are right-padded, so
    causality hides their padding), which gives a padded batch's numbers exactly."""
    if query.device.type == "cuda":
        out = mask.varlen_attention(query, key, value, is_causal=is_causal, dropout_p=dropout_p)
        return out, None
    queries, keys = mask.queries, mask.keys
    out, _ = scaled_dot_product_attention(
        queries.unpack(query),
        keys.unpack(key),
        keys.unpack(value),
        mask=None if is_causal else mask.padded_key_mask(),
        is_causal=is_causal,
        dropout_p=dropout_p,
    )  # (B, H, L, K)
    return queries.pack(out), None


def _bf16_backward_on_cpu(query: Tensor) -> bool:
    """Whether fused attention on `query` would run in bfloat16 on the CPU with a backward pass to
    come (training under bf16 autocast), where it runs in float32 instead (bench/README.md)."""
    autocast_bf16 = (
        torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    )
    return (
        (query.dtype == torch.bfloat16 or autocast_bf16)
        and query.device.type == "cpu"
        and torch.is_grad_enabled()
        and query.requires_grad
    )


def _with_causal(mask: Tensor | None, query_len: int, key_len: int, device: torch.device) -> Tensor:
    causal = causal_mask(query_len, key_len, device=device)  # (Tq, Tk)
    return causal if mask is None else mask & causal


class MultiHeadAttention(nn.Module):
    """§3.2.2 Multi-head attention: MultiHead(Q, K, V) = Concat(head_1..head_h) W^O with
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), d_k = d_v = d_model / n_heads.

    W^Q, W^K, W^V of all heads are stored as one (3D, D) matrix `w_qkv` (rows: W^Q, then W^K,
    then W^V), so self-attention projects queries, keys and values in one matmul; cross-attention
    uses row slices of the same matrix (views, no copy). `w_o` is W^O.

    Deviation from §3.2.2: the projections have biases (as in PyTorch's built-in attention
    module), and `attention_dropout` (default 0, as in the paper) can drop attention weights; on
    CPU any value above 0 forces PyTorch's slow attention path.
    """

    def __init__(
        self, *, d_model: int, n_heads: int, attention_dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if not 0.0 <= attention_dropout < 1.0:
            raise ValueError(f"attention_dropout={attention_dropout} is not in [0, 1)")
        self.d_model = d_model
        self.n_heads = n_heads
        self.attention_dropout = attention_dropout
        self.w_qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        query: Tensor,
        context: Tensor | None = None,
        *,
        mask: AttentionMask | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Self-attention over `query` (B, Tq, D) when `context` is None, else attention from
        `query` to `context` (B, Tk, D). Returns (B, Tq, D) and the per-head weights
        (B, H, Tq, Tk) when `need_weights`, else None."""
        if context is None:
            out, weights, _ = self.self_attention(
                query, mask=mask, is_causal=is_causal, need_weights=need_weights
            )
            return out, weights
        return self.cross_attention(
            query, self.project_context(context), mask=mask, need_weights=need_weights
        )

    def self_attention(
        self,
        x: Tensor,
        *,
        mask: AttentionMask | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: KeyValueCache | None = None,
    ) -> tuple[Tensor, Tensor | None, KeyValueCache | None]:
        """Self-attention of x (B, T, D). With a `cache` of earlier positions, the new keys and
        values are appended to it and the queries attend to all of them. Returns the output
        (B, T, D), the weights or None, and the extended cache (None without one)."""
        B, T, _ = x.shape
        qkv = self.w_qkv(x).view(B, T, 3, self.n_heads, -1)  # (B, T, 3, H, K)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, T, K)
        if cache is not None:
            cache = cache.append(key, value)
            key, value = cache.keys_values()  # (B, H, t + T, K)
            # One new query sees every cached key: no mask needed.
            is_causal = is_causal and T > 1
        out, weights = self._attend(query, key, value, mask, is_causal, need_weights)
        return out, weights, cache

    def project_context(self, context: Tensor) -> KeyValue:
        """Keys and values for cross-attention from context (B, Tk, D); decoding computes these
        once per sentence."""
        B, S, D = context.shape
        kv = F.linear(context, self.w_qkv.weight[D:], _rows(self.w_qkv.bias, D, None))
        key, value = kv.view(B, S, 2, self.n_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        return KeyValue(key, value)  # 2 x (B, H, S, K)

    def cross_attention(
        self,
        x: Tensor,
        context: KeyValue,
        *,
        mask: AttentionMask | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention from x (B, T, D) to keys and values from `project_context`. Returns
        (B, T, D) and the weights (B, H, T, S) or None."""
        B, T, D = x.shape
        query = F.linear(x, self.w_qkv.weight[:D], _rows(self.w_qkv.bias, 0, D))
        query = query.view(B, T, self.n_heads, -1).transpose(1, 2)  # (B, H, T, K)
        return self._attend(query, context.keys, context.values, mask, False, need_weights)

    def _attend(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: AttentionMask | None,
        is_causal: bool,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        B, _, T, _ = query.shape
        out, weights = scaled_dot_product_attention(
            query,
            key,
            value,
            mask=mask,
            is_causal=is_causal,
            dropout_p=self.attention_dropout if self.training else 0.0,
            need_weights=need_weights,
        )
        out = out.transpose(1, 2).reshape(B, T, self.d_model)  # (B, T, D)
        return self.w_o(out), weights


def _rows(bias: Tensor | None, start: int, stop: int | None) -> Tensor | None:
    return None if bias is None else bias[start:stop]

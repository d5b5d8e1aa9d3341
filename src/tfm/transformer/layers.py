"""§3.1 Encoder and Decoder Stacks: the layers, their residual connections, and the stacks.

Each sublayer is wrapped as LayerNorm(x + Dropout(Sublayer(x))) (§3.1 with §5.4's residual
dropout): "post" norm placement, the paper's and the default.

Deviation from §3.1: norm_position="pre" computes x + Dropout(Sublayer(LayerNorm(x))) instead,
which trains more stably without warm-up; the stack then ends with one more LayerNorm, since
nothing else would normalise the last layer's output.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast

from torch import Tensor, nn

from tfm.transformer.args import ModelArgs
from tfm.transformer.dropout import Dropout
from tfm.transformer.feed_forward import PositionwiseFeedForward
from tfm.transformer.multihead_attention import (
    AttentionMask,
    KeyValue,
    KeyValueCache,
    MultiHeadAttention,
)
from tfm.transformer.packing import PackedMask

NORM_POSITIONS = ("post", "pre")


class Residual(nn.Module):
    """The residual connection around one sublayer, with its dropout and LayerNorm."""

    def __init__(self, *, d_model: int, dropout: float, norm_position: str) -> None:
        super().__init__()
        if norm_position not in NORM_POSITIONS:
            raise ValueError(f"norm_position={norm_position!r} is not one of {NORM_POSITIONS}")
        self.pre_norm = norm_position == "pre"
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)

    def sublayer_input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre_norm else x

    def combine(self, x: Tensor, sublayer_output: Tensor) -> Tensor:
        y = x + self.dropout(sublayer_output)
        return y if self.pre_norm else self.norm(y)


def _attention(args: ModelArgs) -> MultiHeadAttention:
    return MultiHeadAttention(
        d_model=args.d_model, n_heads=args.n_heads, attention_dropout=args.attention_dropout
    )


def _feed_forward(args: ModelArgs) -> PositionwiseFeedForward:
    return PositionwiseFeedForward(
        d_model=args.d_model,
        d_ff=args.d_ff,
        activation=args.activation,
        activation_dropout=args.activation_dropout,
    )


def _residual(args: ModelArgs) -> Residual:
    return Residual(d_model=args.d_model, dropout=args.dropout, norm_position=args.norm_position)


class EncoderLayer(nn.Module):
    """§3.1: multi-head self-attention, then the position-wise feed-forward network."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.self_attention = _attention(args)
        self.self_attention_residual = _residual(args)
        self.feed_forward = _feed_forward(args)
        self.feed_forward_residual = _residual(args)

    def forward(
        self, x: Tensor, *, mask: AttentionMask | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, S, D), mask (B, 1, 1, S) or None -> (B, S, D) and weights (B, H, S, S) or None."""
        attended, weights = self.self_attention(
            self.self_attention_residual.sublayer_input(x), mask=mask, need_weights=need_weights
        )
        x = self.self_attention_residual.combine(x, attended)
        x = self.feed_forward_residual.combine(
            x, self.feed_forward(self.feed_forward_residual.sublayer_input(x))
        )
        return x, weights


class DecoderLayer(nn.Module):
    """§3.1: masked self-attention, encoder-decoder (cross) attention, feed-forward network.

    Target padding needs no mask here: targets are right-padded, so causality already hides every
    pad key from every real query. A packed batch's targets have no padding, but lie end to end:
    their self-attention is confined to each sentence by the `PackedMask` of memory_mask's
    queries.
    """

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.self_attention = _attention(args)
        self.self_attention_residual = _residual(args)
        self.cross_attention = _attention(args)
        self.cross_attention_residual = _residual(args)
        self.feed_forward = _feed_forward(args)
        self.feed_forward_residual = _residual(args)

    def forward(
        self,
        x: Tensor,
        memory: KeyValue,
        *,
        memory_mask: AttentionMask | None = None,
        cache: KeyValueCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None, KeyValueCache | None]:
        """x (B, T, D); memory: this layer's cross-attention keys and values (B, H, S, K);
        memory_mask (B, 1, 1, S) or None; cache: self-attention keys and values of earlier
        positions, when decoding step by step. Returns x (B, T, D), self-attention weights
        (B, H, T, t + T), cross-attention weights (B, H, T, S) (both None unless `need_weights`)
        and the extended cache (None without one)."""
        residual = self.self_attention_residual
        self_mask = memory_mask.among_queries() if isinstance(memory_mask, PackedMask) else None
        attended, self_weights, cache = self.self_attention.self_attention(
            residual.sublayer_input(x),
            mask=self_mask,
            is_causal=True,
            need_weights=need_weights,
            cache=cache,
        )
        x = residual.combine(x, attended)
        residual = self.cross_attention_residual
        attended, cross_weights = self.cross_attention.cross_attention(
            residual.sublayer_input(x), memory, mask=memory_mask, need_weights=need_weights
        )
        x = residual.combine(x, attended)
        residual = self.feed_forward_residual
        x = residual.combine(x, self.feed_forward(residual.sublayer_input(x)))
        return x, self_weights, cross_weights, cache


class Encoder(nn.Module):
    """§3.1: `args.n_encoder_layers` identical layers (plus a final LayerNorm if pre-norm)."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(args) for _ in range(args.n_encoder_layers))
        self.final_norm = nn.LayerNorm(args.d_model) if args.norm_position == "pre" else None

    def forward(
        self, x: Tensor, *, mask: AttentionMask | None = None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor]]:
        """x (B, S, D) -> memory (B, S, D) and, if `need_weights`, per layer (B, H, S, S)."""
        all_weights = []
        for layer in self.layers:
            x, weights = layer(x, mask=mask, need_weights=need_weights)
            if need_weights:
                all_weights.append(weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, all_weights


@dataclass(frozen=True)
class DecoderCache:
    """What incremental decoding keeps between steps: per layer, the self-attention keys and
    values of the positions decoded so far and the cross-attention keys and values of the memory
    (computed once), plus the memory padding mask. Each step returns a new one (see
    `KeyValueCache` for what may be done with an old one)."""

    self_attention: list[KeyValueCache]  # per layer (B, H, t, K)
    cross_attention: list[KeyValue]  # per layer (B, H, S, K)
    memory_mask: Tensor | None  # (B, 1, 1, S)

    @property
    def length(self) -> int:
        """t, the number of target positions already in the cache."""
        return self.self_attention[0].length

    def select(self, index: Tensor) -> "DecoderCache":
        """Keep the sentences (or beams) `index` (N,) long, in that order."""
        cross = [KeyValue(k.index_select(0, index), v.index_select(0, index))
                 for k, v in self.cross_attention]  # fmt: skip
        mask = None if self.memory_mask is None else self.memory_mask.index_select(0, index)
        return DecoderCache([kv.select(index) for kv in self.self_attention], cross, mask)

    def reorder_beams(self, index: Tensor) -> "DecoderCache":
        """Like `select`, for an `index` (N,) that maps each row to a row of the same sentence
        (beam search): only the self-attention state differs between such rows, so the
        cross-attention keys and values and the mask are kept as they are."""
        return DecoderCache(
            [kv.select(index) for kv in self.self_attention], self.cross_attention, self.memory_mask
        )


class DecoderOutput(NamedTuple):
    hidden: Tensor  # (B, T, D)
    self_weights: list[Tensor]  # per layer (B, H, T, t + T), empty unless asked for
    cross_weights: list[Tensor]  # per layer (B, H, T, S), empty unless asked for
    cache: DecoderCache | None  # the next cache when one was given


class Decoder(nn.Module):
    """§3.1: `args.n_decoder_layers` identical layers (plus a final LayerNorm if pre-norm)."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(args) for _ in range(args.n_decoder_layers))
        self.final_norm = nn.LayerNorm(args.d_model) if args.norm_position == "pre" else None

    def start_cache(
        self, memory: Tensor, memory_mask: Tensor | None, *, capacity: int = 64
    ) -> DecoderCache:
        """An empty cache for decoding against memory (B, S, D), with room for `capacity`
        target positions before it has to grow."""
        n_heads = self.decoder_layers[0].self_attention.n_heads
        B, _, D = memory.shape
        like = memory.new_empty(D // n_heads)  # (K,)
        return DecoderCache(
            [
                KeyValueCache.empty(like, batch=B, n_heads=n_heads, capacity=capacity)
                for _ in self.layers
            ],
            self._project_context(memory),
            memory_mask,
        )

    @property
    def decoder_layers(self) -> list[DecoderLayer]:
        """The layers, typed (an nn.ModuleList's items are plain modules to a type checker)."""
        return [cast(DecoderLayer, layer) for layer in self.layers]

    def _project_context(self, memory: Tensor) -> list[KeyValue]:
        """Each layer's cross-attention keys and values of memory (B, S, D)."""
        return [layer.cross_attention.project_context(memory) for layer in self.decoder_layers]

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        *,
        memory_mask: AttentionMask | None = None,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
    ) -> DecoderOutput:
        """x (B, T, D) embedded targets; memory (B, S, D), or None when `cache` holds it already;
        memory_mask (B, 1, 1, S) or None (with a cache, the cache's mask is used)."""
        if cache is None:
            if memory is None:
                raise ValueError("Decoder needs memory when no cache is given")
            cross = self._project_context(memory)
            caches: Sequence[KeyValueCache | None] = [None] * len(self.layers)
        else:
            cross, caches, memory_mask = (
                cache.cross_attention,
                cache.self_attention,
                cache.memory_mask,
            )
        self_weights, cross_weights, new_caches = [], [], []
        for layer, memory_kv, layer_cache in zip(self.layers, cross, caches, strict=True):
            x, self_w, cross_w, layer_cache = layer(
                x, memory_kv, memory_mask=memory_mask, cache=layer_cache, need_weights=need_weights
            )
            new_caches.append(layer_cache)
            if need_weights:
                self_weights.append(self_w)
                cross_weights.append(cross_w)
        if self.final_norm is not None:
            x = self.final_norm(x)
        next_cache = None if cache is None else DecoderCache(new_caches, cross, cache.memory_mask)
        return DecoderOutput(x, self_weights, cross_weights, next_cache)

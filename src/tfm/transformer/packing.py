"""Packed batches: the sentences of a batch laid end to end with no padding, for training.

A padded batch (B, L) holds B sentences, each padded up to the widest. Packed, the same batch is
its N real tokens in row-major order, which the model reads as one sequence (1, N); a
`PackedMask` confines attention to each sentence (and, for the decoder, to earlier positions).
Nothing is computed for padding, and on a CUDA GPU attention runs on PyTorch's variable-length
kernels (flash attention in bf16, the memory-efficient kernel in float32) rather than on the
masked kernels a padded batch needs: a boolean mask keeps PyTorch off flash attention.

Elsewhere (the CPU) a packed attention is computed through the padded layout, with the same
kernel and masks as a padded batch, so that both layouts give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Packing:
    """Where the sentences of one side of a batch lie among its packed tokens. Build it from the
    padded batch with `Packing.of`, on the host (its sizes are then known without reading the
    device), and move it with `to`."""

    real: Tensor  # (B, L) bool: the real tokens of the padded batch
    index: Tensor  # (N,) long: each packed token's place in the padded batch flattened, (B * L)
    positions: Tensor  # (N,) long: each packed token's position in its sentence (its column)
    offsets: Tensor  # (B + 1,) long: sentence b is packed tokens offsets[b] to offsets[b + 1]
    min_len: int  # the shortest and longest sentence, as variable-length kernels need them
    max_len: int
    all_real: bool  # no padding at all

    @staticmethod
    def of(real: Tensor) -> Packing:
        """The packing of a padded batch whose real tokens are `real` (B, L) bool, in host
        memory."""
        B, L = real.shape
        lengths = real.sum(dim=1)  # (B,)
        index = real.flatten().nonzero().squeeze(1)  # (N,) row-major
        offsets = torch.zeros(B + 1, dtype=torch.long)
        torch.cumsum(lengths, dim=0, out=offsets[1:])
        return Packing(
            real=real,
            index=index,
            positions=index % L,
            offsets=offsets,
            min_len=int(lengths.min()),
            max_len=int(lengths.max()),
            all_real=bool(real.all()),
        )

    @property
    def width(self) -> int:
        """L, the padded batch's width."""
        return self.real.size(1)

    def to(self, device: torch.device, non_blocking: bool = False) -> Packing:
        def move(t: Tensor) -> Tensor:
            return t.to(device, non_blocking=non_blocking)

        return Packing(
            move(self.real), move(self.index), move(self.positions), move(self.offsets),
            self.min_len, self.max_len, self.all_real,
        )  # fmt: skip

    def pack(self, x: Tensor) -> Tensor:
        """(B, H, L, K) in the padded layout -> (1, H, N, K), the real positions only."""
        B, H, L, K = x.shape
        rows = x.transpose(1, 2).reshape(B * L, H, K).index_select(0, self.index)  # (N, H, K)
        return rows.transpose(0, 1)[None]  # (1, H, N, K)

    def unpack(self, x: Tensor) -> Tensor:
        """(1, H, N, K) packed -> (B, H, L, K) in the padded layout, zeros at padding."""
        _, H, _, K = x.shape
        B, L = self.real.shape
        rows = x.new_zeros(B * L, H, K).index_copy(0, self.index, x[0].transpose(0, 1))
        return rows.view(B, L, H, K).transpose(1, 2)  # (B, H, L, K)


@dataclass(frozen=True)
class PackedBatch:
    """The packings of a batch's sources and targets (the targets: the positions with a real
    target token, whose predictions the loss scores)."""

    src: Packing
    tgt: Packing

    def to(self, device: torch.device, non_blocking: bool = False) -> PackedBatch:
        return PackedBatch(self.src.to(device, non_blocking), self.tgt.to(device, non_blocking))


@dataclass(frozen=True)
class PackedMask:
    """The attention mask of packed sentences, kept as the two packings it derives from: packed
    query token i (of `queries`) may attend to packed key token j (of `keys`) where both belong
    to the same sentence (with `is_causal`, also j at or before i in it). For self-attention the
    two are the same packing; for cross-attention, the targets' and the sources'."""

    queries: Packing
    keys: Packing

    def among_queries(self) -> PackedMask:
        """The self-attention mask of the queries' sentences."""
        return PackedMask(self.queries, self.queries)

    def varlen_attention(
        self, query: Tensor, key: Tensor, value: Tensor, *, is_causal: bool, dropout_p: float
    ) -> Tensor:
        """Attention of packed query (1, H, N, K) to packed key and value (1, H, M, K) on
        PyTorch's variable-length kernels, through jagged nested tensors; with `is_causal`, each
        query sees the keys up to its own position in its sentence (queries and keys the same
        sentences). Returns (1, H, N, K)."""
        out = torch.nn.functional.scaled_dot_product_attention(
            _jagged(query, self.queries),
            _jagged(key, self.keys),
            _jagged(value, self.keys),
            dropout_p=dropout_p,
            is_causal=is_causal,
        )  # (B, H, j, K) nested
        return out.transpose(1, 2).values().transpose(0, 1)[None]  # (1, H, N, K)

    def padded_key_mask(self) -> Tensor | None:
        """The padded layout's key padding mask (B, 1, 1, L), True = real; None without padding."""
        return None if self.keys.all_real else self.keys.real[:, None, None, :]


def _jagged(x: Tensor, packing: Packing) -> Tensor:
    """(1, H, N, K) -> a jagged nested tensor (B, H, j, K) over the same memory; its sizes come
    from the host, so the kernels never wait for the device to compute them."""
    nested = torch.nested.nested_tensor_from_jagged(
        x[0].transpose(0, 1),  # (N, H, K)
        packing.offsets,
        min_seqlen=packing.min_len,
        max_seqlen=packing.max_len,
    )  # (B, j, H, K)
    return nested.transpose(1, 2)

"""Token-budget batches (§5.1: "each training batch contained a set of sentence pairs containing
approximately 25000 source tokens and 25000 target tokens").

Sequences arrive framed by the pipeline: src = ids + [EOS], tgt = [BOS] + ids + [EOS]; all lengths
here are those framed lengths.

The budget is on the padded tensors: a batch of B examples costs B × max(S, T), where S and T are
its longest framed source and target lengths (tgt_in and tgt_out are one shorter), and never
exceeds `max_tokens`. A single example longer than
`max_tokens` is not dropped and does not stop training: it gets a batch of its own (logged once).
Deviation from §5.1: the paper budgets real tokens per side; budgeting the padded size bounds the
memory of every step, and length-sorted batches keep padding small (about 5% on Multi30k).

Batches are cut from examples sorted by width max(src, tgt), then source length. Each epoch shuffles
the examples within each (width, source length) group, so batch compositions change from epoch to
epoch while the batch widths stay tight, then shuffles the order of the batches. Only ties move, so
every epoch has the same number of batches (`len(sampler)`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """Padded tensors for one step. `tgt_in` is the target shifted right (starts with BOS) and
    `tgt_out` the target shifted left (ends with EOS): the decoder reads tgt_in to predict tgt_out.
    """

    src: torch.Tensor  # (B, S) long
    tgt_in: torch.Tensor  # (B, T) long, = tgt[:, :-1]
    tgt_out: torch.Tensor  # (B, T) long, = tgt[:, 1:]
    n_src_tokens: int  # real (non-pad) tokens in src
    n_tgt_tokens: int  # real (non-pad) tokens in tgt_out: what the loss is averaged over

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return replace(
            self,
            src=self.src.to(device, non_blocking=non_blocking),
            tgt_in=self.tgt_in.to(device, non_blocking=non_blocking),
            tgt_out=self.tgt_out.to(device, non_blocking=non_blocking),
        )


def pad(sequences: Sequence[Sequence[int]], pad_id: int = 0) -> torch.Tensor:
    """Right-pad id sequences into one (B, L) long tensor, L the longest length."""
    width = max(len(seq) for seq in sequences)
    rows = [list(seq) + [pad_id] * (width - len(seq)) for seq in sequences]
    return torch.tensor(rows, dtype=torch.long)  # (B, L)


def collate(src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]], pad_id: int = 0) -> Batch:
    """One Batch from framed sequences (src = ids + [EOS], tgt = [BOS] + ids + [EOS])."""
    if not src or len(src) != len(tgt):
        raise ValueError(f"collate needs equally many src and tgt, got {len(src)} and {len(tgt)}")
    if min(len(seq) for seq in src) < 1 or min(len(seq) for seq in tgt) < 2:
        raise ValueError("collate needs src of length >= 1 and tgt of length >= 2 (BOS ... EOS)")
    tgt_padded = pad(tgt, pad_id)  # (B, T + 1)
    return Batch(
        src=pad(src, pad_id),  # (B, S)
        tgt_in=tgt_padded[:, :-1],  # (B, T)
        tgt_out=tgt_padded[:, 1:],  # (B, T)
        n_src_tokens=sum(len(seq) for seq in src),
        n_tgt_tokens=sum(len(seq) - 1 for seq in tgt),
    )


STATIC_MIN_WIDTH = 8


def static_size(n: int) -> int:
    """The smallest size of the fixed set 1, 2, 3, 4, 6, 8, 12, 16, 24, … (2^k and 3·2^k) that
    holds `n`: sizes at most 1.5x apart, so padding to them wastes at most a third."""
    power = 1 << max(n - 1, 0).bit_length()  # the smallest power of two >= n
    return 3 * power // 4 if power >= 4 and 3 * power // 4 >= n else power


def static_shape(sentences: int, src_len: int, tgt_len: int, *, max_tokens: int) -> tuple[int, int]:
    """The (sentences, width) a batch is padded to for static shapes: both sides to one width
    from the fixed set (at least STATIC_MIN_WIDTH), and as many sentences as `max_tokens` allows
    at that width, or the batch's own count rounded up to the set where it has more. Nearly
    every batch of a width then has one shape: a handful of shapes in all."""
    width = static_size(max(src_len, tgt_len, STATIC_MIN_WIDTH))
    full = max_tokens // width
    return (full if sentences <= full else static_size(sentences)), width


def pad_to_static_shape(
    batch: Batch, *, max_tokens: int, pad_id: int, bos_id: int, eos_id: int
) -> Batch:
    """`batch` padded to its `static_shape`, for launch-bound training (CUDA graphs,
    torch.compile). Added sentences are a source of one EOS and a target of BOS alone, with no
    real target token: every attention row keeps a key (no all-masked softmax, no NaN), and the
    loss, which counts real target tokens only, does not see them."""
    B, S = batch.src.shape
    T = batch.tgt_in.size(1)
    sentences, width = static_shape(B, S, T, max_tokens=max_tokens)
    if (sentences, width, width) == (B, S, T):
        return batch
    src = torch.full((sentences, width), pad_id, dtype=batch.src.dtype)
    tgt_in, tgt_out = src.clone(), src.clone()
    src[:B, :S], tgt_in[:B, :T], tgt_out[:B, :T] = batch.src, batch.tgt_in, batch.tgt_out
    src[B:, 0], tgt_in[B:, 0] = eos_id, bos_id
    return replace(batch, src=src, tgt_in=tgt_in, tgt_out=tgt_out)


@dataclass(frozen=True)
class Pairs:
    """An epoch's framed training pairs before batching (src = ids + [EOS], tgt = [BOS] + ids +
    [EOS]); pair i is (src[i], tgt[i]). Lists, or `RaggedIds` (or views) of the data cache."""

    src: Sequence[Sequence[int]]
    tgt: Sequence[Sequence[int]]


@dataclass
class EpochData:
    """One epoch's training data: framed ids per pair, and the batches (lists of pair indices)
    in training order."""

    src: Sequence[Sequence[int]]  # a list, or a `RaggedIds` (or view) of the data cache
    tgt: Sequence[Sequence[int]]
    batches: list[list[int]]

    def batch(self, indices: Sequence[int]) -> Batch:
        """The padded tensors of the pairs `indices` (e.g. one of `batches`)."""
        return collate([self.src[i] for i in indices], [self.tgt[i] for i in indices])


class TokenBatchSampler:
    """Training batches (lists of example indices) under a padded-token budget.

    `epoch(e)` is a pure function of (seed, e): a run resumes inside an epoch by index, as
    `sampler.epoch(e)[k:]` for the k batches already done.
    """

    def __init__(
        self,
        src_lengths: Sequence[int] | np.ndarray,
        tgt_lengths: Sequence[int] | np.ndarray,
        *,
        max_tokens: int,
        seed: int,
        shuffle: bool = True,
        quiet: bool = False,
    ) -> None:
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError(
                f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths"
            )
        src = np.asarray(src_lengths, dtype=np.int64)
        widths = np.maximum(src, np.asarray(tgt_lengths, dtype=np.int64))
        _check(widths, max_tokens)
        self.seed, self.shuffle = seed, shuffle
        # By width, then source length; ties in index order (lexsort is stable, as sorted() is).
        order = np.lexsort((src, widths))
        sorted_widths, sorted_src = widths[order], src[order]
        changes = (np.diff(sorted_widths) != 0) | (np.diff(sorted_src) != 0)
        starts = np.concatenate([[0], np.flatnonzero(changes) + 1]).tolist()
        self._order: list[int] = order.tolist()
        self._groups = list(zip(starts, [*starts[1:], len(order)], strict=True))
        self._bounds = _cut(sorted_widths.tolist(), max_tokens)
        if not quiet:  # an epoch transform builds one sampler an epoch; the plain one has warned
            _warn_oversized(widths, max_tokens)

    def __len__(self) -> int:
        """Batches per epoch (the same for every epoch)."""
        return len(self._bounds)

    def epoch(self, epoch: int) -> list[list[int]]:
        """The batches of `epoch`, in training order; every index exactly once."""
        order = list(self._order)
        if not self.shuffle:
            return [order[a:b] for a, b in self._bounds]
        # A string seed goes through SHA-512: stable across runs, processes and Python versions.
        rng = random.Random(f"tfm-batches:{self.seed}:{epoch}")
        for a, b in self._groups:
            if b - a > 1:
                group = order[a:b]
                rng.shuffle(group)
                order[a:b] = group
        batches = [order[a:b] for a, b in self._bounds]
        rng.shuffle(batches)
        return batches


def steps_in_epoch(n_batches: int, *, accumulate: int, world_size: int) -> int:
    """The optimizer steps training makes of an epoch of `n_batches` global batches: one per
    `world_size × accumulate` batches (processes × accumulated), and one more for a rest that
    gives every process one (`training.data_parallel.shard`)."""
    per_step = world_size * accumulate
    return n_batches // per_step + (n_batches % per_step >= world_size)


def inference_batches(lengths: Sequence[int], *, max_tokens: int) -> list[list[int]]:
    """Decoding batches, longest first (memory trouble shows at once), B × longest <= max_tokens.

    Every index appears exactly once; the caller puts the outputs back in input order.
    """
    _check(lengths, max_tokens)
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable: ties by index
    bounds = _cut([lengths[i] for i in order], max_tokens)
    return [order[a:b] for a, b in bounds]


def padding_share(
    src_lengths: Sequence[int], tgt_lengths: Sequence[int], batches: Sequence[Sequence[int]]
) -> float:
    """Share of real tokens among all tokens of the padded src and tgt tensors of `batches`.

    Counted on the framed lengths as given (the target before the tgt_in/tgt_out shift).
    """
    real = padded = 0
    for batch in batches:
        batch_real, batch_padded = token_counts(src_lengths, tgt_lengths, batch)
        real += batch_real
        padded += batch_padded
    if padded == 0:
        raise ValueError("padding_share needs at least one non-empty batch")
    return real / padded


def token_counts(
    src_lengths: Sequence[int] | np.ndarray,
    tgt_lengths: Sequence[int] | np.ndarray,
    batch: Sequence[int],
) -> tuple[int, int]:
    """The real tokens of one non-empty batch's src and tgt, and the tokens of their padded
    tensors, counted on the framed lengths as given."""
    src = [int(src_lengths[i]) for i in batch]
    tgt = [int(tgt_lengths[i]) for i in batch]
    return sum(src) + sum(tgt), len(batch) * (max(src) + max(tgt))


def _check(widths: Sequence[int] | np.ndarray, max_tokens: int) -> None:
    if max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens} must be positive")
    if len(widths) and min(widths) < 1:
        raise ValueError(f"sequence lengths must be positive, got {min(widths)}")


def _cut(sorted_widths: Sequence[int], max_tokens: int) -> list[tuple[int, int]]:
    """Greedy [start, end) spans over length-sorted widths with count × max width <= max_tokens."""
    bounds, start, longest = [], 0, 0
    for end, width in enumerate(sorted_widths):
        longest = max(longest, width)
        if end > start and longest * (end - start + 1) > max_tokens:
            bounds.append((start, end))
            start, longest = end, width
    if sorted_widths:
        bounds.append((start, len(sorted_widths)))
    return bounds


def _warn_oversized(widths: np.ndarray, max_tokens: int) -> None:
    over = widths[widths > max_tokens]
    if len(over):
        log.warning(
            "%d example(s) longer than max_tokens=%d (longest %d): each gets a batch of its own",
            len(over),
            max_tokens,
            int(over.max()),
        )

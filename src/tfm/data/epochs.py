"""What each training epoch trains on: the training split's pairs, changed by the epoch transforms
in one list, then cut into token-budget batches (`batching.TokenBatchSampler`).

An epoch transform changes an epoch's pairs before batching: bidirectional training adds each
pair reversed (`bidirectional.BothDirections`). `EpochPlan` applies the transforms active in an
epoch, in list order, and batches the result for that epoch; the training loop and its progress
bar only ask it for "the data of epoch e" and "how many batches epochs have", and never name a
transform.

Every epoch is a pure function of (seed, epoch): transforms draw from their own seeded
generators and batching shuffles with `TokenBatchSampler`'s, never from the global ones, so a run
that resumes inside an epoch gets the same pairs and batches again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Protocol

from tfm.config import Config, planned
from tfm.data.batching import EpochData, Pairs, TokenBatchSampler
from tfm.data.bidirectional import BothDirections
from tfm.data.pipeline import EncodedSplit
from tfm.data.ragged import lengths_of

log = logging.getLogger(__name__)


class EpochTransform(Protocol):
    """One change to the pairs of the epochs it is active in; a pure function of its input and
    the epoch. `describe` says what it did to one epoch, for the log."""

    def active(self, epoch: int) -> bool: ...

    def __call__(self, pairs: Pairs, epoch: int) -> Pairs: ...

    def describe(self, before: Pairs, after: Pairs, epoch: int) -> str: ...


class EpochPlan:
    """The data of every training epoch: `split`'s pairs through the `transforms` active in the
    epoch (in list order), batched under `max_tokens` for that epoch with `seed`.

    `sampler` batches the split as it is: an epoch with no transform active is `sampler.epoch(e)`
    over the split's own lists. The last epoch built is kept, since the progress bar's total and
    the loop both ask for the one training starts in.
    """

    def __init__(
        self,
        split: EncodedSplit,
        *,
        max_tokens: int,
        seed: int,
        transforms: Sequence[EpochTransform] = (),
    ) -> None:
        self.split, self.max_tokens, self.seed = split, max_tokens, seed
        self.transforms = list(transforms)
        self.sampler = TokenBatchSampler(
            lengths_of(split.src),
            lengths_of(split.tgt),
            max_tokens=max_tokens,
            seed=seed,
        )
        self._last: tuple[int, EpochData] | None = None

    @classmethod
    def from_config(cls, config: Config, split: EncodedSplit) -> EpochPlan:
        """The plan of a run: both directions in the first `train.bidirectional_epochs` epochs."""
        t = config.train
        max_tokens = planned(t.max_tokens, "train.max_tokens")
        transforms: list[EpochTransform] = []
        if t.bidirectional_epochs > 0:
            transforms.append(BothDirections(epochs=t.bidirectional_epochs))
        return cls(split, max_tokens=max_tokens, seed=t.seed, transforms=transforms)

    def data(self, epoch: int) -> EpochData:
        """Epoch `epoch`'s pairs and its batches (lists of pair indices) in training order."""
        if self._last is not None and self._last[0] == epoch:
            return self._last[1]
        active = [t for t in self.transforms if t.active(epoch)]
        split = self.split
        if not active:
            data = EpochData(src=split.src, tgt=split.tgt, batches=self.sampler.epoch(epoch))
        else:
            data = self._transformed(active, epoch)
        self._last = (epoch, data)
        return data

    def _transformed(self, active: list[EpochTransform], epoch: int) -> EpochData:
        level = logging.INFO if epoch == 0 else logging.DEBUG  # once per run is enough to read
        pairs = Pairs(src=self.split.src, tgt=self.split.tgt)
        for transform in active:
            changed = transform(pairs, epoch)
            if log.isEnabledFor(level):
                log.log(level, "epoch %d: %s", epoch, transform.describe(pairs, changed, epoch))
            pairs = changed
        sampler = TokenBatchSampler(
            lengths_of(pairs.src),
            lengths_of(pairs.tgt),
            max_tokens=self.max_tokens,
            seed=self.seed,
            quiet=True,  # `self.sampler` has warned about examples over the budget
        )
        batches = sampler.epoch(epoch)
        log.log(level, "epoch %d: %d pairs in %d batches", epoch, len(pairs.src), len(batches))
        return EpochData(src=pairs.src, tgt=pairs.tgt, batches=batches)

    def batch_counts(self, epochs: range, *, near: int) -> list[int]:
        """The number of batches of each of `epochs`, e.g. for a progress bar's total.

        Epochs with the same transforms active count the same batches when the transforms keep
        the pairs' lengths from epoch to epoch (both directions); one that re-segmented the
        text would change them slightly, and one epoch stands for all of its kind: the first
        at or after `near`, else the last before it. The epoch `near` is built last, so that it
        is the one kept for the loop.
        """
        kinds: dict[tuple[bool, ...], list[int]] = {}
        for epoch in epochs:
            kinds.setdefault(self._kind(epoch), []).append(epoch)
        standing = {
            kind: min((e for e in members if e >= near), default=max(members))
            for kind, members in kinds.items()
        }
        counts = {}
        for kind, epoch in sorted(standing.items(), key=lambda item: item[1] == near):
            counts[kind] = len(self.data(epoch).batches) if any(kind) else len(self.sampler)
        return [counts[self._kind(epoch)] for epoch in epochs]

    def _kind(self, epoch: int) -> tuple[bool, ...]:
        return tuple(t.active(epoch) for t in self.transforms)

    def fingerprint(self) -> str:
        """What identifies the training pairs every epoch is built from (their ids, in order):
        a resumed run must train on the same ones. Checkpoints written before the data cache
        (`tfm.data.cache.prepared_cache`) store this; newer ones store the cache entry's, which is
        cheaper."""
        digest = hashlib.sha256()
        for src, tgt in zip(self.split.src, self.split.tgt, strict=True):
            digest.update(json.dumps([src, tgt]).encode())
        return digest.hexdigest()[:16]

"""Bidirectional training ("BiT", Ding et al., 2021): early epochs train on both directions.

For the first `train.bidirectional_epochs` epochs, every training pair is used twice: as given
(source → target) and reversed (target → source). With one joint vocabulary the reversed pair is
only a re-framing of the same ids, and the model tells the direction from the language of its
input, so no tag is needed. Later epochs train on the configured direction only, which is the
one validation, test and translation use.

`BothDirections` is an epoch transform (`tfm.data.epochs`): the epoch's plan batches the doubled
pairs anew for that epoch, so a run resumes inside a both-ways epoch exactly.
"""

from __future__ import annotations

from tfm.data.batching import Pairs
from tfm.data.ragged import Joined, Reframed
from tfm.data.tokenizer import BOS_ID


def both_directions(pairs: Pairs) -> Pairs:
    """`pairs`, then each pair reversed: pair i's reverse is pair n + i, its source the target
    without BOS (ids + [EOS]), its target the source with BOS in front ([BOS] + ids + [EOS])."""
    src = Joined(pairs.src, Reframed(pairs.tgt, drop=1))  # views: nothing is copied
    tgt = Joined(pairs.tgt, Reframed(pairs.src, prefix=[BOS_ID]))
    return Pairs(src=src, tgt=tgt)


class BothDirections:
    """The epoch transform of the first `epochs` epochs: every pair, and every pair reversed."""

    def __init__(self, *, epochs: int) -> None:
        if epochs < 0:
            raise ValueError(f"epochs={epochs} must not be negative")
        self.epochs = epochs

    def active(self, epoch: int) -> bool:
        return epoch < self.epochs

    def __call__(self, pairs: Pairs, epoch: int) -> Pairs:
        return both_directions(pairs)

    def describe(self, before: Pairs, after: Pairs, epoch: int) -> str:
        return f"both directions: {len(before.src)} pairs, each also reversed"

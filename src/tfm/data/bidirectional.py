"""Bidirectional training ("BiT", Ding et al., 2021): early epochs train on both directions.

For the first `train.bidirectional_epochs` epochs, every training pair is used twice: as given
(source → target) and reversed (target → source). With one joint vocabulary the reversed pair is
only a re-framing of the same ids, and the model tells the direction from the language of its
input, so no tag is needed. Later epochs train on the configured direction only, which is the
one validation, test and translation use.
"""

from __future__ import annotations

import logging

from tfm.data.batching import EpochData, TokenBatchSampler
from tfm.data.ragged import Joined, Reframed
from tfm.data.tokenizer import BOS_ID

log = logging.getLogger(__name__)


def both_directions(data: EpochData, *, seed: int, epoch: int, max_tokens: int) -> EpochData:
    """`data`'s pairs, then each pair reversed, batched anew for `epoch` (a pure function of
    seed and epoch, as `TokenBatchSampler.epoch` is, so a run resumes inside the epoch exactly).

    Pair i's reverse is pair n + i: its source is the target without BOS (ids + [EOS]), its
    target the source with BOS in front ([BOS] + ids + [EOS]).
    """
    src = Joined(data.src, Reframed(data.tgt, drop=1))  # views: nothing is copied
    tgt = Joined(data.tgt, Reframed(data.src, prefix=[BOS_ID]))
    sampler = TokenBatchSampler(
        src.lengths,
        tgt.lengths,
        max_tokens=max_tokens,
        seed=seed,
        quiet=True,  # a reversed pair is at most one token wider; the plain sampler has warned
    )
    batches = sampler.epoch(epoch)
    log.log(
        logging.INFO if epoch == 0 else logging.DEBUG,
        "bidirectional epoch %d: %d pairs (each also reversed) in %d batches",
        epoch,
        len(data.src),
        len(batches),
    )
    return EpochData(src=src, tgt=tgt, batches=batches)

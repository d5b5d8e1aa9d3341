"""Teacher-forced scoring: log p(target | source) of given pairs, and the mean loss per token.

The model reads the whole reference target at once (§3.1: the decoder's input is the target
shifted right), so one forward pass per batch scores every position; nothing is searched.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tfm.data.batching import collate, inference_batches
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import EOS_ID, PAD_ID
from tfm.device import autocast
from tfm.prediction.ensemble import Model
from tfm.prediction.settings import DecodeSettings


def teacher_forced_loss(model: Model, split: EncodedSplit, settings: DecodeSettings) -> float:
    """Mean negative log-likelihood per real target token (no label smoothing)."""
    total, count = teacher_forced_nll(model, split, settings)
    return total / max(count, 1)


def teacher_forced_nll(
    model: Model, split: EncodedSplit, settings: DecodeSettings
) -> tuple[float, int]:
    """The summed negative log-likelihood of a split's targets and the number of tokens it
    sums over: the parts of the mean loss, which add up across the chunks of a long input."""
    total = -sum(sequence_log_probs(model, split.src, split.tgt, settings))
    return total, sum(_predicted(model, t) for t in split.tgt)


def mean_log_probs(
    model: Model,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    settings: DecodeSettings,
) -> list[float]:
    """log p(target | source) / the tokens it sums over, of each framed pair, in input order."""
    sums = sequence_log_probs(model, sources, targets, settings)
    return [total / _predicted(model, t) for total, t in zip(sums, targets, strict=True)]


def _predicted(model: Model, target: Sequence[int]) -> int:
    """The tokens of a framed target that are predicted: all but BOS, at most the positional
    table's (as `sequence_log_probs` cuts them)."""
    return min(len(target) - 1, model.max_len)


@torch.inference_mode()
def sequence_log_probs(
    model: Model,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    settings: DecodeSettings,
) -> list[float]:
    """log p(target | source) of each framed pair (src = ids + EOS, tgt = BOS + ids + EOS): the
    sum over the target's tokens, EOS included, in input order. Pairs longer than the positional
    table are cut to fit it."""
    model.eval()
    limit = model.max_len
    src = [s if len(s) <= limit else [*s[: limit - 1], EOS_ID] for s in sources]
    tgt = [t if len(t) <= limit + 1 else [*t[:limit], EOS_ID] for t in targets]
    lengths = [max(len(s), len(t)) for s, t in zip(src, tgt, strict=True)]
    result = [0.0] * len(src)
    for indices in inference_batches(lengths, max_tokens=settings.max_tokens):
        batch = collate([src[i] for i in indices], [tgt[i] for i in indices])
        batch = batch.to(settings.torch_device())
        real = batch.tgt_out != PAD_ID  # (B, T)
        with autocast(settings.torch_device(), settings.torch_dtype()):
            logits = model(batch.src, batch.tgt_in, keep=real)  # (N, V), real positions in order
        log_probs = logits.float().log_softmax(dim=-1)
        picked = log_probs.gather(1, batch.tgt_out[real].unsqueeze(1)).squeeze(1)  # (N,)
        rows = real.nonzero()[:, 0]  # the sentence of each real position
        sums = torch.zeros(len(indices), device=picked.device).index_add_(0, rows, picked)
        for i, value in zip(indices, sums.tolist(), strict=True):
            result[i] = value
    return result

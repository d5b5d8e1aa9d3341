"""Several trained models decoding as one (not in the paper).

An ensemble of independently trained models predicts each next token from the mean of the
members' probabilities, p(y | ...) = (1/M) sum_m p_m(y | ...): the "linear" combination that
ensembles of NMT systems have used since the first shared tasks. `Ensemble` offers the part of
`Transformer`'s interface that search and scoring use (`encode`, `start_cache`, `decode_step`,
`forward`, `pad_id`, `max_len`): it is a `Decodable`, so `greedy_decode`, `beam_search` and a
teacher-forced loss take it unchanged. Its "logits" are the log of the mean probability: already
normalised, so a softmax over them gives the ensemble's distribution back, and cross-entropy on
them is the ensemble's negative log-likelihood.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor, nn

from tfm.transformer.layers import DecoderCache
from tfm.transformer.model import DecodeStep, Transformer


def mean_probability_logits(logits: Sequence[Tensor]) -> Tensor:
    """M tensors of logits (..., V) -> log((1/M) sum_m softmax(logits_m)) (..., V), in float32."""
    log_probs = torch.stack([x.float().log_softmax(dim=-1) for x in logits])  # (M, ..., V)
    return torch.logsumexp(log_probs, dim=0) - math.log(len(logits))  # (..., V)


@dataclass(frozen=True)
class EnsembleCache:
    """One `DecoderCache` per member, selected and reordered together."""

    members: list[DecoderCache]

    @property
    def length(self) -> int:
        return self.members[0].length

    def select(self, index: Tensor) -> EnsembleCache:
        """Keep the sentences (or beams) `index` (N,) long, in that order, in every member."""
        return EnsembleCache([cache.select(index) for cache in self.members])

    def reorder_beams(self, index: Tensor) -> EnsembleCache:
        """`DecoderCache.reorder_beams` in every member."""
        return EnsembleCache([cache.reorder_beams(index) for cache in self.members])


class Ensemble(nn.Module):
    """Models with one target vocabulary and padding id, averaged in probability space.

    Members may differ in size and depth; they must read the same token ids, which the caller
    checks (one tokenizer). `max_len` is the smallest member's positional table.
    """

    def __init__(self, members: Sequence[Transformer]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one model")
        vocab = {m.output_projection.out_features for m in members}
        pads = {m.pad_id for m in members}
        if len(vocab) > 1 or len(pads) > 1:
            raise ValueError(
                f"ensemble members differ in target vocabulary size {sorted(vocab)} "
                f"or padding id {sorted(pads)}"
            )
        self.members = nn.ModuleList(members)
        self.pad_id = pads.pop()

    @property
    def models(self) -> list[Transformer]:
        """The members, typed (an nn.ModuleList's items are plain modules to a type checker)."""
        return [cast(Transformer, m) for m in self.members]

    @property
    def max_len(self) -> int:
        return min(m.max_len for m in self.models)

    def encode(self, src_ids: Tensor) -> list[Tensor]:
        """src_ids (B, S) -> each member's memory (B, S, D_m)."""
        return [m.encode(src_ids) for m in self.models]

    def start_cache(
        self, memory: list[Tensor], src_ids: Tensor, *, capacity: int = 64
    ) -> EnsembleCache:
        """Each member's empty cache for its own memory (see `Transformer.start_cache`)."""
        return EnsembleCache(
            [m.start_cache(mem, src_ids, capacity=capacity)
             for m, mem in zip(self.models, memory, strict=True)]
        )  # fmt: skip

    def decode_step(
        self, tgt_ids: Tensor, cache: EnsembleCache, *, need_weights: bool = False
    ) -> DecodeStep:
        """Every member's next step; logits (B, V) are the log of the mean probability. The
        members' attention weights do not combine into one picture, so none are returned."""
        if need_weights:
            raise ValueError("an ensemble does not return attention weights; use one model")
        steps = [m.decode_step(tgt_ids, c) for m, c in zip(self.models, cache.members, strict=True)]
        logits = mean_probability_logits([s.logits for s in steps])  # (B, V)
        return DecodeStep(logits, [], EnsembleCache([s.cache for s in steps]))

    def forward(self, src_ids: Tensor, tgt_ids: Tensor, *, keep: Tensor | None = None) -> Tensor:
        """Teacher forcing: the log of the mean probability (B, T, V), or (N, V) for the
        positions where `keep` (B, T) is True (see `Transformer.forward`)."""
        return mean_probability_logits([m(src_ids, tgt_ids, keep=keep) for m in self.models])


Model = Transformer | Ensemble  # one trained model, or several decoding as one

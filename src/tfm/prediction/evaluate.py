"""Decode a split and score it: teacher-forced loss and perplexity, then the translation scores
of `tfm.evaluation` (sacreBLEU cased and lowercased, chrF, exact match, lengths)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import Tokenizer
from tfm.evaluation import score_translations
from tfm.prediction.likelihood import teacher_forced_loss
from tfm.prediction.settings import DecodeSettings, Model
from tfm.prediction.translate import split_nbest, translate_ids

# sources, their n-best lists of (text, score) -> the lists re-sorted (`Reranker.rerank`)
Rerank = Callable[[Sequence[str], list[list[tuple[str, float]]]], list[list[tuple[str, float]]]]


def evaluate_split(
    model: Model,
    tokenizer: Tokenizer,
    split: EncodedSplit,
    settings: DecodeSettings,
    *,
    rerank: Rerank | None = None,
) -> tuple[dict, list[str]]:
    """Loss, perplexity and translation scores of a split; also returns the hypotheses. With
    `rerank` (sources, n-best lists -> re-sorted lists; `tfm.prediction.reranking`), each
    hypothesis is the best of the whole beam after reranking. `decode_seconds` is the time the
    search took (reranking included, loss and scoring left out), `sentences_per_second` its rate."""
    loss = teacher_forced_loss(model, split, settings)
    started = time.perf_counter()
    if rerank is None:
        hypotheses = tokenizer.decode_tgt(translate_ids(model, split.src, settings))
    else:
        nbest = split_nbest(model, tokenizer, split, settings)
        hypotheses = [ranked[0][0] for ranked in rerank(split.src_text, nbest)]
    seconds = time.perf_counter() - started
    scores = score_translations(hypotheses, split.tgt_text)
    scores["decode_seconds"] = round(seconds, 3)
    scores["sentences_per_second"] = round(len(hypotheses) / max(seconds, 1e-9), 1)
    scores["loss"] = round(loss, 4)
    scores["perplexity"] = round(math.exp(min(loss, 50.0)), 3)
    return scores, hypotheses

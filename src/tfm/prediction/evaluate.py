"""Decode a split and score it: teacher-forced loss and perplexity, then the translation scores
of `tfm.evaluation` (sacreBLEU cased and lowercased, chrF, exact match, lengths)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence

from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import Tokenizer
from tfm.evaluation import score_translations
from tfm.prediction.likelihood import teacher_forced_nll
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
    return evaluate_chunks(model, tokenizer, [split], settings, rerank=rerank)


def evaluate_chunks(
    model: Model,
    tokenizer: Tokenizer,
    chunks: Iterable[EncodedSplit],
    settings: DecodeSettings,
    *,
    rerank: Rerank | None = None,
) -> tuple[dict, list[str]]:
    """`evaluate_split` of consecutive chunks of one input, encoded as they are taken: only the
    sentences and hypotheses of the whole input are kept, so memory does not grow with its
    token ids. Over-long sources are named by their line in the whole input."""
    nll, tokens, seconds = 0.0, 0, 0.0
    hypotheses: list[str] = []
    references: list[str] = []
    for chunk in chunks:
        chunk_nll, chunk_tokens = teacher_forced_nll(model, chunk, settings)
        nll, tokens = nll + chunk_nll, tokens + chunk_tokens
        numbers = range(len(hypotheses) + 1, len(hypotheses) + len(chunk) + 1)
        started = time.perf_counter()
        if rerank is None:
            found = translate_ids(model, chunk.src, settings, numbers=numbers)
            hypotheses += tokenizer.decode_tgt(found)
        else:
            nbest = split_nbest(model, tokenizer, chunk, settings, numbers=numbers)
            hypotheses += [ranked[0][0] for ranked in rerank(chunk.src_text, nbest)]
        seconds += time.perf_counter() - started
        references += chunk.tgt_text
    loss = nll / max(tokens, 1)
    scores = score_translations(hypotheses, references)
    scores["decode_seconds"] = round(seconds, 3)
    scores["sentences_per_second"] = round(len(hypotheses) / max(seconds, 1e-9), 1)
    scores["loss"] = round(loss, 4)
    scores["perplexity"] = round(math.exp(min(loss, 50.0)), 3)
    return scores, hypotheses

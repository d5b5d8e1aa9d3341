"""Decode a split and score it: teacher-forced loss and perplexity, then the translation scores
of `tfm.prediction.scoring` (sacreBLEU cased and lowercased, chrF, exact match, lengths)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from tfm.data.pipeline import EncodedSplit
from tfm.prediction.confidence import Judged, read_figures, sentence_chrf
from tfm.prediction.scoring import score_translations
from tfm.prediction.translator import Translator


def evaluate_chunks(
    translator: Translator, chunks: Iterable[EncodedSplit], *, judged: list[Judged] | None = None
) -> tuple[dict, list[str]]:
    """Loss, perplexity and translation scores of consecutive chunks of one input by a
    translator (with its ensemble and reranker, if any; BLEU tokenized for the run's target
    language: `tfm.prediction.scoring.bleu_tokenizer_for`), and the hypotheses. The chunks are
    encoded as they are taken: only the sentences and hypotheses of the whole input are kept, so
    memory does not grow with its token ids. Over-long sources are named by their line in the
    whole input. Loss and perplexity are None where the translator's engine cannot score (an
    export); `decode_seconds` is the time the search took (loss and scoring left out),
    `sentences_per_second` its rate. With `judged`, each hypothesis's `Judged` is appended to
    it, in order: its figure (the mean log-probability of the ids the search found for it,
    from one teacher-forced pass after the search, outside its time), the confidence the
    translator's map reads off it, if one does, and its sentence chrF."""
    tgt_lang = translator.settings.tgt_lang or translator.config.data.tgt_lang
    if judged is None:

        def translate(chunk: EncodedSplit, first_line: int) -> list[str]:
            return translator.translate_split(chunk, first_line=first_line)

        return scored_chunks(chunks, translate, translator.nll, tgt_lang=tgt_lang)
    found: list[list[int]] = []  # the ids of the chunk's translations

    def search(chunk: EncodedSplit, first_line: int) -> list[str]:
        numbers = list(range(first_line, first_line + len(chunk.src)))
        best = [ranked[0] for ranked in translator.ranked_found(
            chunk.src_text, chunk.src, translator.settings, numbers)]  # fmt: skip
        found[:] = [ids for *_, ids in best]
        return [text for text, *_ in best]

    def judge(chunk: EncodedSplit, hypotheses: list[str]) -> None:
        none: list[float | None] = [None] * len(found)
        figures = translator.log_probs(chunk.src, found) or none
        confidences = read_figures(translator.reading_map(), figures)
        chrf = sentence_chrf(hypotheses, chunk.tgt_text)
        judged.extend(map(Judged, confidences, figures, chrf))

    return scored_chunks(chunks, search, translator.nll, tgt_lang=tgt_lang, after=judge)


def scored_chunks(
    chunks: Iterable[EncodedSplit],
    translate: Callable[[EncodedSplit, int], list[str]],
    nll: Callable[[EncodedSplit], tuple[float, int] | None],
    *,
    tgt_lang: str | None,
    after: Callable[[EncodedSplit, list[str]], None] | None = None,
) -> tuple[dict, list[str]]:
    """The scores of `translate(chunk, its first line's number)` over the chunks, and the
    hypotheses; the loss from `nll(chunk)` (None when it gives None); BLEU for `tgt_lang`.
    `after(chunk, its hypotheses)` is called once each chunk is translated (not timed)."""
    total, tokens, seconds = 0.0, 0, 0.0
    scorable = True
    hypotheses: list[str] = []
    references: list[str] = []
    for chunk in chunks:
        found = nll(chunk)
        if found is None:
            scorable = False
        else:
            total, tokens = total + found[0], tokens + found[1]
        started = time.perf_counter()
        translated = translate(chunk, len(hypotheses) + 1)
        seconds += time.perf_counter() - started
        if after is not None:
            after(chunk, translated)
        hypotheses += translated
        references += chunk.tgt_text
    scores = score_translations(hypotheses, references, tgt_lang=tgt_lang)
    scores["decode_seconds"] = round(seconds, 3)
    scores["sentences_per_second"] = round(len(hypotheses) / max(seconds, 1e-9), 1)
    loss = total / max(tokens, 1)
    scores["loss"] = round(loss, 4) if scorable else None
    scores["perplexity"] = round(math.exp(min(loss, 50.0)), 3) if scorable else None
    return scores, hypotheses

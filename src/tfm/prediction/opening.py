"""A trained run opened for decoding: its model (or an ensemble of it and more runs), the decode
settings its config and the user's options give, and a reranker of reverse-direction runs."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from tfm.device import resolve_precision, select_device
from tfm.errors import UsageError
from tfm.prediction import Ensemble
from tfm.prediction.reranking import Reranker
from tfm.prediction.settings import DecodeRequest, DecodeSettings, Model
from tfm.prediction.translate import translate_texts, translate_texts_nbest
from tfm.rundir.model_file import TrainedModel, load_trained
from tfm.rundir.paths import find_run
from tfm.threads import use_threads

log = logging.getLogger(__name__)

RERANK_MIN_BEAM = 5  # the beam reranking chooses from, unless --beam-size says otherwise


@dataclass(frozen=True)
class Decoding:
    """A trained run ready to translate: the run, the model to decode with (its own, or an
    ensemble), the decode settings, and the reranker of the beam, if any."""

    trained: TrainedModel
    model: Model
    settings: DecodeSettings
    reranker: Reranker | None = None

    def translate(self, texts: Sequence[str], *, first_line: int = 1) -> list[str]:
        """One translation per text, in order; an empty line stays empty. With a reranker, each
        is the beam's best after reranking. `first_line`: the line number of texts[0]."""
        if self.reranker is not None:
            return [best[0][0] for best in self.nbest(texts, 1, first_line=first_line)]
        return translate_texts(
            self.model, self.trained.tokenizer, texts, self.settings, first_line=first_line
        )

    def nbest(
        self, texts: Sequence[str], n_best: int, *, first_line: int = 1
    ) -> list[list[tuple[str, float]]]:
        """The `n_best` (translation, score) pairs of each text, best first. With a reranker,
        the whole beam is reranked and the scores are the combined ones."""
        tokenizer = self.trained.tokenizer
        if self.reranker is None:
            return translate_texts_nbest(
                self.model, tokenizer, texts, self.settings, n_best, first_line=first_line
            )
        beam = self.settings.beam_size
        found = translate_texts_nbest(
            self.model, tokenizer, texts, self.settings, beam, first_line=first_line
        )
        return [ranked[:n_best] for ranked in self.reranker.rerank(texts, found)]


def open_decoding(request: DecodeRequest, *, min_beam: int = 1) -> Decoding:
    """The run of `request` opened for decoding. The decode settings come from the run's
    config and the request; without a beam size in the request, the config's but at least
    `min_beam`, or at least 5 when reranking."""
    if request.rerank_weight is not None and not request.rerank_with:
        raise UsageError("--rerank-weight needs --rerank-with RUN (a reverse-direction run)")
    beam_size, length_penalty = request.beam_size, request.length_penalty
    if request.rerank_with:
        if beam_size == 1:
            raise UsageError("--rerank-with reranks a beam: give --beam-size 2 or more")
        min_beam = max(min_beam, RERANK_MIN_BEAM)
    paths = find_run(request.run)
    target = select_device(request.device or "auto")
    use_threads(request.threads, level=logging.DEBUG)  # translate stays a quiet filter
    trained = load_trained(paths, target)
    dtype = resolve_precision(trained.config.train.precision, target)
    beam_size = beam_size or max(trained.config.decoding.beam_size, min_beam)
    settings = DecodeSettings.from_config(
        trained.config.decoding, target, dtype, beam_size=beam_size, length_penalty=length_penalty
    )
    if length_penalty is not None and settings.beam_size == 1:
        log.warning("--length-penalty has no effect on greedy decoding; give --beam-size 2 or more")
    model = _ensemble_of(trained, request.ensemble, target)
    weight = 1.0 if request.rerank_weight is None else request.rerank_weight
    return Decoding(
        trained, model, settings, _reranker(trained, request.rerank_with, weight, target)
    )


def _ensemble_of(
    trained: TrainedModel, others: Sequence[str | Path], target: torch.device
) -> Model:
    """`trained`'s model alone, or an `Ensemble` of it and the models of the runs `others`,
    which must use the same tokenizer (the same tokens under the same ids)."""
    loaded = [(other, load_trained(find_run(other), target)) for other in others]
    model = _combined(trained, loaded, "--ensemble")
    if others:
        log.info("decoding with an ensemble of %d models", len(others) + 1)
    return model


def _combined(
    first: TrainedModel, others: Sequence[tuple[str | Path, TrainedModel]], option: str
) -> Model:
    """`first`'s model alone, or an `Ensemble` of it and the loaded runs `others` (named as the
    user gave them, after `option`), which must share `first`'s tokenizer."""
    if not others:
        return first.model
    fingerprint = first.tokenizer.fingerprint()
    for name, member in others:
        if member.tokenizer.fingerprint() != fingerprint:
            raise UsageError(
                f"{option} {name}: its tokenizer differs from the one in "
                f"{first.paths.root}; an ensemble's runs must share one tokenizer "
                "(train them on the same data with the same tokenizer settings)"
            )
    return Ensemble([first.model, *(member.model for _, member in others)])


def _reranker(
    trained: TrainedModel, runs: Sequence[str | Path], weight: float, target: torch.device
) -> Reranker | None:
    """A `Reranker` of the runs (one model, or an ensemble), which must translate the other
    way: from `trained`'s target language to its source language (a run trained that way, or
    one trained both ways in every epoch)."""
    if not runs:
        return None
    ours = trained.config.data
    loaded = [(name, load_trained(find_run(name), target)) for name in runs]
    for name, reverse in loaded:
        theirs = reverse.config.data
        if not reverse.config.translates(ours.tgt_lang, ours.src_lang):
            raise UsageError(
                f"--rerank-with {name}: it translates {theirs.src_lang}→{theirs.tgt_lang}; "
                f"reranking {ours.src_lang}→{ours.tgt_lang} needs a run trained "
                f"{ours.tgt_lang}→{ours.src_lang}, or both ways in every epoch "
                "(train.bidirectional_epochs ≥ train.max_epochs)"
            )
    first = loaded[0][1]
    model = _combined(first, loaded[1:], "--rerank-with")
    dtype = resolve_precision(first.config.train.precision, target)
    settings = DecodeSettings.from_config(first.config.decoding, target, dtype)
    log.info("reranking the beam with %d reverse model(s), weight %g", len(runs), weight)
    return Reranker(model, first.tokenizer, settings, weight)

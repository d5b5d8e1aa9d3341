"""What `tfm eval` and `tfm translate` do, as library functions the CLI calls (and tests use)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from tfm.data import formats
from tfm.data.corpus import LoadReport
from tfm.data.pipeline import encode_split, prepare_splits
from tfm.device import resolve_precision, select_device
from tfm.errors import DataError, UsageError
from tfm.evaluation import (
    DecodeSettings,
    Model,
    evaluate_split,
    translate_texts,
    translate_texts_nbest,
)
from tfm.reranking import Reranker
from tfm.rundir.metrics import json_safe
from tfm.rundir.model_file import TrainedModel, load_trained
from tfm.rundir.paths import find_run
from tfm.transformer import Ensemble

log = logging.getLogger(__name__)

RERANK_MIN_BEAM = 5  # the beam reranking chooses from, unless --beam-size says otherwise


def open_decoding(
    run: str | Path | None,
    device: str | None,
    beam_size: int | None,
    length_penalty: float | None,
    *,
    ensemble: Sequence[str | Path] = (),
    min_beam: int = 1,
    rerank_with: Sequence[str | Path] = (),
    rerank_weight: float | None = None,
) -> tuple[TrainedModel, Model, DecodeSettings, Reranker | None]:
    """The trained run, the model to decode with (the run's, or an ensemble of it and the runs
    in `ensemble`), the decoding settings (the run's config decides them) and the reranker of
    the runs in `rerank_with`, if any. Without `beam_size`, the config's beam size but at least
    `min_beam`, or at least 5 when reranking."""
    if rerank_weight is not None and not rerank_with:
        raise UsageError("--rerank-weight needs --rerank-with RUN (a reverse-direction run)")
    if rerank_with:
        if beam_size == 1:
            raise UsageError("--rerank-with reranks a beam: give --beam-size 2 or more")
        min_beam = max(min_beam, RERANK_MIN_BEAM)
    paths = find_run(run)
    target = select_device(device or "auto")
    trained = load_trained(paths, target)
    dtype = resolve_precision(trained.config.train.precision, target)
    beam_size = beam_size or max(trained.config.decoding.beam_size, min_beam)
    settings = DecodeSettings.from_config(
        trained.config.decoding, target, dtype, beam_size=beam_size, length_penalty=length_penalty
    )
    if length_penalty is not None and settings.beam_size == 1:
        log.warning("--length-penalty has no effect on greedy decoding; give --beam-size 2 or more")
    model = _ensemble_of(trained, ensemble, target)
    weight = 1.0 if rerank_weight is None else rerank_weight
    return trained, model, settings, _reranker(trained, rerank_with, weight, target)


def _ensemble_of(
    trained: TrainedModel, others: Sequence[str | Path], target, *, option: str = "--ensemble"
) -> Model:
    """`trained`'s model alone, or an `Ensemble` of it and the models of the runs `others`,
    which must use the same tokenizer (the same tokens under the same ids)."""
    model = _combined(
        trained, [(other, load_trained(find_run(other), target)) for other in others], option
    )
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
    trained: TrainedModel, runs: Sequence[str | Path], weight: float, target
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


def evaluate_run(
    run: str | Path | None,
    *,
    split: str = "test",
    src: Path | None = None,
    ref: Path | None = None,
    device: str | None = None,
    beam_size: int | None = None,
    length_penalty: float | None = None,
    ensemble: Sequence[str | Path] = (),
    rerank_with: Sequence[str | Path] = (),
    rerank_weight: float | None = None,
) -> tuple[dict, list[str]]:
    """Scores (and hypotheses in input order) of a trained run, or of an ensemble of it and the
    runs in `ensemble`, on a split or on --src/--ref; with `rerank_with`, the beam's best after
    reranking by those reverse-direction runs (`tfm.reranking`)."""
    rerank = {"rerank_with": rerank_with, "rerank_weight": rerank_weight}
    trained, model, settings, reranker = open_decoding(
        run, device, beam_size, length_penalty, ensemble=ensemble, **rerank
    )
    tokenizer = trained.tokenizer
    if src is not None and ref is not None:
        src_text, ref_text = read_lines(src, option="--src"), read_lines(ref, option="--ref")
        if len(src_text) != len(ref_text):
            raise DataError(
                f"{src} has {len(src_text)} lines but {ref} has {len(ref_text)}; "
                "they must be aligned line by line"
            )
        if not src_text:
            raise DataError(f"{src}: no sentences to score (the file is empty)")
        report = LoadReport(
            split="files", origin=f"{src}, {ref}", read=len(src_text), kept=len(src_text)
        )
        data = encode_split("files", src_text, ref_text, report, tokenizer)
        name = f"{src}"
    else:
        splits, _ = prepare_splits(
            trained.config.data, trained.config.tokenizer, (split,), tokenizer=tokenizer
        )
        data, name = splits[split], split
    rerank_fn = None if reranker is None else reranker.rerank
    scores, hypotheses = evaluate_split(model, tokenizer, data, settings, rerank=rerank_fn)
    header = {"run": str(trained.paths.root), "split": name, "step": trained.step}
    if ensemble:
        header["ensemble"] = [str(Path(other)) for other in ensemble]  # found by _open
    decoding = {"beam_size": settings.beam_size, "length_penalty": settings.length_penalty}
    if reranker is not None:
        decoding["rerank_with"] = [str(Path(other)) for other in rerank_with]
        decoding["rerank_weight"] = reranker.weight
    return json_safe({**header, **decoding, **scores}), hypotheses  # NaN/inf scores as None


def translate_lines(
    run: str | Path | None,
    lines: list[str],
    *,
    device: str | None = None,
    beam_size: int | None = None,
    length_penalty: float | None = None,
    ensemble: Sequence[str | Path] = (),
    rerank_with: Sequence[str | Path] = (),
    rerank_weight: float | None = None,
) -> list[str]:
    """Translations of `lines`, one per line, in order; an empty line stays empty. With
    `rerank_with`, each is the beam's best after reranking (`tfm.reranking`)."""
    decoding = {"device": device, "beam_size": beam_size, "length_penalty": length_penalty}
    if rerank_with:
        rerank = {"rerank_with": rerank_with, "rerank_weight": rerank_weight}
        found = translate_lines_nbest(run, lines, 1, ensemble=ensemble, **decoding, **rerank)
        return [best[0][0] for best in found]
    trained, model, settings, _ = open_decoding(
        run, device, beam_size, length_penalty, ensemble=ensemble, rerank_weight=rerank_weight
    )
    return translate_texts(model, trained.tokenizer, lines, settings)


def translate_lines_nbest(
    run: str | Path | None,
    lines: list[str],
    n_best: int,
    *,
    device: str | None = None,
    beam_size: int | None = None,
    length_penalty: float | None = None,
    ensemble: Sequence[str | Path] = (),
    rerank_with: Sequence[str | Path] = (),
    rerank_weight: float | None = None,
) -> list[list[tuple[str, float]]]:
    """The `n_best` (translation, score) pairs of each line, best first, by beam search; the
    beam is `beam_size`, else the config's but at least `n_best`. With `rerank_with`, the whole
    beam is reranked (`tfm.reranking`) and the scores are the combined ones."""
    if beam_size is not None and beam_size < n_best:
        raise UsageError(f"--n-best {n_best} needs --beam-size {n_best} or more, not {beam_size}")
    rerank = {"rerank_with": rerank_with, "rerank_weight": rerank_weight}
    trained, model, settings, reranker = open_decoding(
        run, device, beam_size, length_penalty, ensemble=ensemble, min_beam=n_best, **rerank
    )
    if reranker is None:
        return translate_texts_nbest(model, trained.tokenizer, lines, settings, n_best)
    found = translate_texts_nbest(model, trained.tokenizer, lines, settings, settings.beam_size)
    return [ranked[:n_best] for ranked in reranker.rerank(lines, found)]


def read_lines(path: Path, *, option: str = "--file") -> list[str]:
    """A UTF-8 text file's lines (split on "\\n" only); errors name the file, line and option."""
    return formats.read_lines(path, key=option)

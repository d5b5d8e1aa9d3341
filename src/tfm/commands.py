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
from tfm.run import TrainedModel, find_run, load_trained
from tfm.transformer import Ensemble

log = logging.getLogger(__name__)


def _open(
    run: str | Path | None,
    device: str | None,
    beam_size: int | None,
    length_penalty: float | None,
    *,
    ensemble: Sequence[str | Path] = (),
    min_beam: int = 1,
) -> tuple[TrainedModel, Model, DecodeSettings]:
    """The trained run, the model to decode with (the run's, or an ensemble of it and the runs
    in `ensemble`) and the decoding settings; the run's config decides them. Without
    `beam_size`, the config's beam size but at least `min_beam`."""
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
    return trained, _ensemble_of(trained, ensemble, target), settings


def _ensemble_of(trained: TrainedModel, others: Sequence[str | Path], target) -> Model:
    """`trained`'s model alone, or an `Ensemble` of it and the models of the runs `others`,
    which must use the same tokenizer (the same tokens under the same ids)."""
    if not others:
        return trained.model
    members, fingerprint = [trained.model], trained.tokenizer.fingerprint()
    for other in others:
        member = load_trained(find_run(other), target)
        if member.tokenizer.fingerprint() != fingerprint:
            raise UsageError(
                f"--ensemble {other}: its tokenizer differs from the one in "
                f"{trained.paths.root}; an ensemble's runs must share one tokenizer "
                "(train them on the same data with the same tokenizer settings)"
            )
        members.append(member.model)
    log.info("decoding with an ensemble of %d models", len(members))
    return Ensemble(members)


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
) -> tuple[dict, list[str]]:
    """Scores (and hypotheses in input order) of a trained run, or of an ensemble of it and the
    runs in `ensemble`, on a split or on --src/--ref."""
    trained, model, settings = _open(run, device, beam_size, length_penalty, ensemble=ensemble)
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
    scores, hypotheses = evaluate_split(model, tokenizer, data, settings)
    header = {"run": str(trained.paths.root), "split": name, "step": trained.step}
    if ensemble:
        header["ensemble"] = [str(Path(other)) for other in ensemble]  # found by _open
    decoding = {"beam_size": settings.beam_size, "length_penalty": settings.length_penalty}
    return {**header, **decoding, **scores}, hypotheses


def translate_lines(
    run: str | Path | None,
    lines: list[str],
    *,
    device: str | None = None,
    beam_size: int | None = None,
    length_penalty: float | None = None,
    ensemble: Sequence[str | Path] = (),
) -> list[str]:
    """Translations of `lines`, one per line, in order; an empty line stays empty."""
    trained, model, settings = _open(run, device, beam_size, length_penalty, ensemble=ensemble)
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
) -> list[list[tuple[str, float]]]:
    """The `n_best` (translation, score) pairs of each line, best first, by beam search; the
    beam is `beam_size`, else the config's but at least `n_best`."""
    if beam_size is not None and beam_size < n_best:
        raise UsageError(f"--n-best {n_best} needs --beam-size {n_best} or more, not {beam_size}")
    trained, model, settings = _open(
        run, device, beam_size, length_penalty, ensemble=ensemble, min_beam=n_best
    )
    return translate_texts_nbest(model, trained.tokenizer, lines, settings, n_best)


def read_lines(path: Path, *, option: str = "--file") -> list[str]:
    """A UTF-8 text file's lines (split on "\\n" only); errors name the file, line and option."""
    return formats.read_lines(path, key=option)

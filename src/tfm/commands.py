"""What `tfm eval` and `tfm translate` do, as library functions the CLI calls (and tests use)."""

from __future__ import annotations

import logging
from pathlib import Path

from tfm.data import formats
from tfm.data.corpus import LoadReport
from tfm.data.pipeline import encode_split, prepare_splits
from tfm.device import resolve_precision, select_device
from tfm.errors import DataError, UsageError
from tfm.evaluation import (
    DecodeSettings,
    evaluate_split,
    translate_texts,
    translate_texts_nbest,
)
from tfm.run import TrainedModel, find_run, load_trained

log = logging.getLogger(__name__)


def _open(
    run: str | Path | None,
    device: str | None,
    beam_size: int | None,
    length_penalty: float | None,
    *,
    min_beam: int = 1,
) -> tuple[TrainedModel, DecodeSettings]:
    """The trained run and its decoding settings; without `beam_size`, the config's beam size
    but at least `min_beam`."""
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
    return trained, settings


def evaluate_run(
    run: str | Path | None,
    *,
    split: str = "test",
    src: Path | None = None,
    ref: Path | None = None,
    device: str | None = None,
    beam_size: int | None = None,
    length_penalty: float | None = None,
) -> tuple[dict, list[str]]:
    """Scores (and hypotheses in input order) of a trained run on a split or on --src/--ref."""
    trained, settings = _open(run, device, beam_size, length_penalty)
    tokenizer = trained.tokenizer
    if src is not None and ref is not None:
        src_text, ref_text = read_lines(src, option="--src"), read_lines(ref, option="--ref")
        if len(src_text) != len(ref_text):
            raise DataError(
                f"{src} has {len(src_text)} lines but {ref} has {len(ref_text)}; "
                "they must be aligned line by line"
            )
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
    scores, hypotheses = evaluate_split(trained.model, tokenizer, data, settings)
    header = {"run": str(trained.paths.root), "split": name, "step": trained.step}
    decoding = {"beam_size": settings.beam_size, "length_penalty": settings.length_penalty}
    return {**header, **decoding, **scores}, hypotheses


def translate_lines(
    run: str | Path | None,
    lines: list[str],
    *,
    device: str | None = None,
    beam_size: int | None = None,
    length_penalty: float | None = None,
) -> list[str]:
    """Translations of `lines`, one per line, in order; an empty line stays empty."""
    trained, settings = _open(run, device, beam_size, length_penalty)
    return translate_texts(trained.model, trained.tokenizer, lines, settings)


def translate_lines_nbest(
    run: str | Path | None,
    lines: list[str],
    n_best: int,
    *,
    device: str | None = None,
    beam_size: int | None = None,
    length_penalty: float | None = None,
) -> list[list[tuple[str, float]]]:
    """The `n_best` (translation, score) pairs of each line, best first, by beam search; the
    beam is `beam_size`, else the config's but at least `n_best`."""
    if beam_size is not None and beam_size < n_best:
        raise UsageError(f"--n-best {n_best} needs --beam-size {n_best} or more, not {beam_size}")
    trained, settings = _open(run, device, beam_size, length_penalty, min_beam=n_best)
    return translate_texts_nbest(trained.model, trained.tokenizer, lines, settings, n_best)


def read_lines(path: Path, *, option: str = "--file") -> list[str]:
    """A UTF-8 text file's lines (split on "\\n" only); errors name the file, line and option."""
    return formats.read_lines(path, key=option)

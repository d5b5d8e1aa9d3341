"""`tfm calibrate`, and the end of `tfm train`: fit a run's confidence map on its validation split
(`tfm.prediction.confidence`) and keep it in the run directory as confidence.json, listed in the
manifest.

The map is fitted on the translations `tfm translate` gives by default, as validation decodes
them. When the run holds the hypotheses of the validation that chose its model (validations/,
as a training run does at its end), they are read from there: nothing is decoded and the data
files are not read again, so fitting costs one teacher-forced pass of the model over the split
and its sentence chrF scores (a quarter to a third of the time beam search takes to decode it,
on a CPU). A run without them (an averaged one, `tfm average`) has its validation split decoded
once.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tfm.commands.engines import open_translator
from tfm.data.pipeline import prepare_splits
from tfm.errors import UsageError
from tfm.prediction.confidence import (
    ConfidenceMap,
    low_share_gap,
    save_map,
    sentence_chrf,
    spearman,
)
from tfm.prediction.settings import DecodeRequest
from tfm.prediction.torch_translator import TorchTranslator
from tfm.prediction.translator import Translator
from tfm.rundir.manifest import file_digest
from tfm.rundir.metrics import json_safe
from tfm.rundir.paths import RunPaths, is_export
from tfm.training.validation import read_validation_output

log = logging.getLogger(__name__)


def calibrate_run(
    run: str | Path | None, *, device: str | None = None, threads: int | None = None
) -> dict:
    """Fit the confidence map of the run `run` (None: the one last trained here) for its model
    file, write it, and return what it found: the file, the sentences, the validation's mean
    chrF, Spearman's rho between the figure and sentence chrF, how far below the mean the least
    confident tenth scores, the low mark, where the translations came from and the seconds."""
    if run is not None and is_export(run):
        raise UsageError(f"--run {run}: a CTranslate2 export reads the confidence map of the "
                         "model it was exported from: calibrate that tfm run, then export it "
                         "again")  # fmt: skip
    started = time.perf_counter()
    translator = open_translator(DecodeRequest(run=run, device=device, threads=threads))
    assert isinstance(translator, TorchTranslator)
    assert translator.run is not None and translator.model_file is not None
    paths = RunPaths(translator.run)
    sources, references, hypotheses, origin = _validation(translator, paths)
    found = fit_map(translator, sources, references, hypotheses)
    seconds = round(time.perf_counter() - started, 2)
    fitted = {**found.fitted, "translations": origin, "seconds": seconds}
    found = dataclasses.replace(found, fitted=fitted)
    written = save_map(paths.root, found, file_digest(translator.model_file) or "")
    log.info("confidence map fitted on %d validation sentences in %.1f s (Spearman %s with "
             "sentence chrF): %s", fitted["sentences"], seconds, fitted["spearman"],
             written)  # fmt: skip
    return {"map": str(written), **fitted, "low": found.low}


def fit_map(
    translator: Translator,
    sources: Sequence[str],
    references: Sequence[str],
    hypotheses: Sequence[str],
) -> ConfidenceMap:
    """The map for `translator`'s model, fitted on its `hypotheses` of `sources` (a validation
    split, decoded as the translator decodes by default) scored against `references`; its
    `fitted` says on how many sentences, with what decoding, and how well the figure ranks
    them (Spearman's rho, and how far below the mean the least confident tenth scores)."""
    todo = [i for i, source in enumerate(sources) if source.strip()]
    if len(todo) < 2:
        raise ValueError(f"{len(todo)} sentence(s) to fit a confidence map on; it needs 2 or more")
    picked = [sources[i] for i in todo], [hypotheses[i] for i in todo]
    figures = translator.log_probs(*picked)
    if figures is None:
        raise ValueError(f"a {translator.engine} translator cannot score translations")
    chrf = sentence_chrf(picked[1], [references[i] for i in todo])
    found = ConfidenceMap.fit(figures, chrf, translator.settings.strategy.name)
    fitted = {
        "sentences": len(todo),
        "decoding": translator.settings.strategy.describe(),
        "mean_chrf": round(float(np.mean(chrf)), 2),
        "spearman": round(spearman(figures, chrf), 4),  # NaN, as None, when chrF is constant
        "low_tenth_gap": round(low_share_gap([found(f) for f in figures], chrf), 2),
    }
    return dataclasses.replace(found, fitted=json_safe(fitted))


def _validation(
    translator: TorchTranslator, paths: RunPaths
) -> tuple[list[str], list[str], list[str], str]:
    """The validation split's sources, references and the model's translations, and where the
    translations came from: the validation that chose the model, else decoded now."""
    kept = paths.validation_output(translator.step) if translator.step is not None else None
    if kept is not None and kept.is_file():
        sources, references, hypotheses = read_validation_output(kept)
        return sources, references, hypotheses, str(kept.relative_to(paths.root))
    config = translator.config
    splits, _ = prepare_splits(config.data, config.tokenizer, ("validation",),
                               tokenizer=translator.tokenizer)  # fmt: skip
    split = splits["validation"]
    return split.src_text, split.tgt_text, translator.translate_split(split), "decoded"

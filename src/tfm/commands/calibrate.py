"""`tfm calibrate`, and the end of `tfm train`: fit a run's confidence map on its validation split
(`tfm.prediction.confidence`) and keep it in the run directory as confidence.json, listed in the
manifest.

The map is fitted on the translations `tfm translate` gives by default: the validation split is
decoded once with the run's planned decoding, and the figure of each translation is read off the
ids the search found (one teacher-forced pass of the model). It costs about one validation
(whose time the log of a timed run gives), after the run's time budget.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import numpy as np

from tfm.commands.engines import open_translator
from tfm.data.cache.corpus_record import remember_held_out
from tfm.data.pipeline import EncodedSplit, prepare_splits
from tfm.errors import UsageError
from tfm.prediction.confidence import (
    ConfidenceMap,
    Judged,
    low_share_gap,
    save_map,
    spearman,
)
from tfm.prediction.settings import DecodeRequest
from tfm.prediction.split_evaluation import evaluate_chunks
from tfm.prediction.torch_translator import TorchTranslator
from tfm.prediction.translator import Translator
from tfm.rundir.manifest import file_digest
from tfm.rundir.metrics import json_safe
from tfm.rundir.paths import RunPaths, is_export

log = logging.getLogger(__name__)


def calibrate_run(
    run: str | Path | None, *, device: str | None = None, threads: int | None = None
) -> dict:
    """Fit the confidence map of the run `run` (None: the one last trained here) for its model
    file, write it, and return what it found: the file, the sentences, the decoding, the
    validation's mean sentence chrF, Spearman's rho between the figure and sentence chrF, how
    far below the mean the least confident tenth scores, the low mark and the seconds."""
    if run is not None and is_export(run):
        raise UsageError(f"--run {run}: a CTranslate2 export reads the confidence map of the "
                         "model it was exported from: calibrate that tfm run, then export it "
                         "again")  # fmt: skip
    started = time.perf_counter()
    translator = open_translator(DecodeRequest(run=run, device=device, threads=threads))
    assert isinstance(translator, TorchTranslator)
    assert translator.run is not None and translator.model_file is not None
    config = translator.config
    remember_held_out(config)  # a held-out validation from the data cache, where it is there
    splits, _ = prepare_splits(config.data, config.tokenizer, ("validation",),
                               tokenizer=translator.tokenizer)  # fmt: skip
    found = fit_map(translator, splits["validation"])
    seconds = round(time.perf_counter() - started, 2)
    fitted = {**found.fitted, "seconds": seconds}
    found = dataclasses.replace(found, fitted=fitted)
    root = RunPaths(translator.run).root
    written = save_map(root, found, file_digest(translator.model_file) or "")
    log.info("confidence map fitted on %d validation sentences in %.1f s (Spearman %s with "
             "sentence chrF): %s", fitted["sentences"], seconds, fitted["spearman"],
             written)  # fmt: skip
    return {"map": str(written), **fitted, "low": found.low}


def fit_map(translator: Translator, split: EncodedSplit) -> ConfidenceMap:
    """The map for `translator`'s model, fitted on its translations of `split` (a validation
    split), decoded as the translator decodes by default; its `fitted` says on how many
    sentences, with what decoding, and how well the figure ranks them (Spearman's rho, and how
    far below the mean the least confident tenth scores)."""
    judged: list[Judged] = []
    evaluate_chunks(translator, [split], judged=judged)
    rated = [j for j in judged if j.log_prob is not None]
    if len(rated) < 2:
        raise ValueError(f"{len(rated)} sentence(s) to fit a confidence map on; it needs 2 or more")
    figures, chrf = [j.log_prob for j in rated if j.log_prob is not None], [j.chrf for j in rated]
    strategy = translator.settings.strategy
    found = ConfidenceMap.fit(figures, chrf, strategy.name)
    fitted = {
        "sentences": len(rated),
        "decoding": strategy.describe(),
        "mean_chrf": round(float(np.mean(chrf)), 2),
        "spearman": round(spearman(figures, chrf), 4),  # NaN, as None, when chrF is constant
        "low_tenth_gap": round(low_share_gap([found(f) for f in figures], chrf), 2),
    }
    return dataclasses.replace(found, fitted=json_safe(fitted))

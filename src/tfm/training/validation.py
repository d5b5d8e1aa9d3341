"""Validation during training: scores on the validation split, the metrics line, every
hypothesis beside its source and reference (validations/step-N.tsv), sample translations and
degeneration warnings in the log, best.pt and early stopping, then a checkpoint. The related
pairs' own validation splits are scored beside the main pair's (their BLEU and chrF in the same
metrics line, `val_bleu/en-pt`; validations/step-N.en-pt.tsv); early stopping and best.pt follow
the main pair alone.
"""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path

from tfm.atomic import atomic_write_text
from tfm.data.pipeline import EncodedSplit
from tfm.prediction.settings import DecodeSettings
from tfm.prediction.split_evaluation import evaluate_chunks
from tfm.prediction.torch_translator import TorchTranslator
from tfm.rundir.metrics import read_metrics
from tfm.rundir.store import finite_score
from tfm.training.diagnostics import degenerate_warnings
from tfm.training.session import Session

log = logging.getLogger(__name__)


def validate_and_checkpoint(session: Session) -> bool:
    """Validate, log, keep best.pt and a checkpoint; True when early stopping says stop."""
    t, p = session.config.train, session.progress
    split = session.validation_split
    scores, hypotheses = evaluate_chunks(_translator(session), [split])
    session.validated_step = p.step
    event = {
        "step": p.step,
        "val_loss": scores["loss"],
        "val_ppl": scores["perplexity"],
        "val_bleu": scores["bleu"],
        "val_bleu_lowercase": scores["bleu_lowercase"],
        "val_chrf": scores["chrf"],
        "val_length_ratio": scores["length_ratio"],  # hypothesis / reference tokens
    }
    log.info(
        "step %d validation: loss %.3f, ppl %.2f, BLEU %.2f, chrF %.2f, length ratio %s",
        p.step, event["val_loss"], event["val_ppl"], event["val_bleu"], event["val_chrf"],
        event["val_length_ratio"],
    )  # fmt: skip
    event |= _related_scores(session)
    session.write_metrics(event)
    session.last_validation = event
    write_validation_output(session.paths.validation_output(p.step), split, hypotheses)
    for i in range(min(t.validation_samples, len(hypotheses))):
        log.info("  src: %s\n  ref: %s\n  hyp: %s", split.src_text[i], split.tgt_text[i],
                 hypotheses[i])  # fmt: skip
    warn_degenerate(session, hypotheses)
    metric = t.early_stopping_metric
    score = finite_score(-scores["loss"] if metric == "loss" else scores[metric])
    if score is not None and (p.best_score is None or score > p.best_score):
        p.best_score, p.best_step, p.validations_without_gain = score, p.step, 0
        session.save_model(session.paths.best)
    else:
        p.validations_without_gain += 1
    session.save_checkpoint(score)
    return t.patience is not None and p.validations_without_gain >= t.patience


def _related_scores(session: Session) -> dict[str, float]:
    """BLEU and chrF of each related pair's own validation split, decoded into its target
    language (logged; each pair's hypotheses in validations/step-N.en-pt.tsv)."""
    step, found = session.progress.step, {}
    for related in session.related_validations:
        translator = _translator(session, related.tgt_lang)
        scores, hypotheses = evaluate_chunks(translator, [related.split])
        found[f"val_bleu/{related.pair}"] = scores["bleu"]
        found[f"val_chrf/{related.pair}"] = scores["chrf"]
        log.info("step %d validation of %s (related): BLEU %.2f, chrF %.2f", step, related.pair,
                 scores["bleu"], scores["chrf"])  # fmt: skip
        path = session.paths.validation_output(step, related.pair)
        write_validation_output(path, related.split, hypotheses)
    return found


def _translator(session: Session, tgt_lang: str | None = None) -> TorchTranslator:
    """The model being trained as a Translator, decoding as its config says (into `tgt_lang`,
    a related pair's target; None: the main pair's): the one prediction path of `tfm eval`,
    `tfm translate` and the server."""
    config = session.config
    settings = DecodeSettings.from_config(config.decoding, session.device, session.dtype)
    if tgt_lang is not None:
        settings = settings.into(config.data, tgt_lang)
    return TorchTranslator(model=session.model, tokenizer=session.tokenizer, config=config,
                           settings=settings, step=session.progress.step)  # fmt: skip


def write_validation_output(path: Path, split: EncodedSplit, hypotheses: list[str]) -> None:
    """A TSV file (header source, reference, hypothesis; one row per pair, in split order;
    Python's csv quoting where a text holds a tab or a quote), written atomically."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(["source", "reference", "hypothesis"])
    writer.writerows(zip(split.src_text, split.tgt_text, hypotheses, strict=True))
    path.parent.mkdir(exist_ok=True)
    atomic_write_text(out.getvalue(), path)


def warn_degenerate(session: Session, hypotheses: list[str]) -> None:
    """Log each sign of degeneration: in full the first time a kind shows up in this process,
    then one short line pointing back to that step."""
    step = session.progress.step
    findings = degenerate_warnings(hypotheses, read_metrics(session.paths.metrics))
    session.last_findings = tuple(finding.kind for finding in findings)
    for finding in findings:
        if finding.kind in session.warned_at:  # the advice was given once; say it persists
            log.warning("step %d: still %s (advice at step %d)", step, finding.seen,
                        session.warned_at[finding.kind])  # fmt: skip
        else:
            log.warning("step %d: %s", step, finding)
            session.warned_at[finding.kind] = step

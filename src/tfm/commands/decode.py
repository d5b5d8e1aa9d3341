"""`tfm eval` and `tfm translate`: a `Translator` (a trained run, an ensemble, a reranked beam,
or an export) decoding a split, aligned files, or lines as they come."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from tfm.commands import input as input_lines
from tfm.commands.input import line_chunks, read_aligned
from tfm.data.corpus import LoadReport
from tfm.data.pipeline import EncodedSplit, encode_split, prepare_splits
from tfm.errors import UsageError
from tfm.prediction.confidence import REPORT_KEYS, Judged, confidence_report
from tfm.prediction.split_evaluation import evaluate_chunks
from tfm.prediction.translator import Translator
from tfm.rundir.metrics import json_safe

log = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")


def check_eval_options(split: str, src: Path | None, ref: Path | None) -> None:
    """`tfm eval`'s options, checked before a model is loaded."""
    if (src is None) != (ref is None):
        raise UsageError("--src and --ref go together")
    if split not in SPLITS:
        raise UsageError(f"--split {split!r}: expected train, validation or test")


def evaluate_run(
    translator: Translator,
    *,
    split: str = "test",
    src: Path | None = None,
    ref: Path | None = None,
    output: Path | None = None,
    lines: tuple[list[str], list[str]] | None = None,
    confidences: Path | None = None,
) -> tuple[dict, list[str]]:
    """Scores (and hypotheses in input order) of the translator on a split or on the aligned
    files `src` and `ref`; the hypotheses are also written to `output`, one per line, when
    given, and each one's confidence, figure and sentence chrF to `confidences`
    (`write_confidences`; see `tfm.prediction.split_evaluation.evaluate_chunks`). `lines` are
    the files' lines when the caller has read them already (with `read_aligned`, so that a
    mistake in them is named before a model is loaded). Loss and perplexity are None where the
    translator cannot score (an export); how well the confidences rank the sentences by chrF
    (`tfm.prediction.confidence.confidence_report`) is None where no confidence map reads
    them."""
    check_eval_options(split, src, ref)
    chunks: Iterable[EncodedSplit]
    if src is not None and ref is not None:
        src_text, ref_text = lines if lines is not None else read_aligned(src, ref)
        chunks, name = _aligned_files(translator, src, ref, src_text, ref_text), str(src)
    else:
        from tfm.data.cache.corpus_record import remember_held_out  # eval's, not translate's

        config, tokenizer = translator.config, translator.tokenizer
        if translator.settings.tgt_lang not in (None, config.data.tgt_lang):
            raise UsageError(
                f"--tgt-lang {translator.settings.tgt_lang}: the run's {split} split is "
                f"{config.data.src_lang}→{config.data.tgt_lang}; score another target "
                "language with --src and --ref"
            )
        remember_held_out(config)  # a held-out split from the data cache, where it is there
        splits, _ = prepare_splits(config.data, config.tokenizer, (split,), tokenizer=tokenizer)
        chunks, name = [splits[split]], split
    reading = translator.reading_map()
    judged: list[Judged] | None = [] if reading is not None or confidences is not None else None
    scores, hypotheses = evaluate_chunks(translator, chunks, judged=judged)
    if output is not None:
        output.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    if confidences is not None and judged is not None:
        write_confidences(confidences, judged)
    found = translator.describe()
    header = {"run": found.pop("run", None), "split": name, **found}
    strategy = translator.settings.strategy.describe()  # its name and settings
    report = confidence_report(judged) if reading is not None and judged is not None else None
    scores = {**scores, **(report or dict.fromkeys(REPORT_KEYS))}
    return json_safe({**header, **strategy, **scores}), hypotheses  # NaN/inf scores as None


def write_confidences(path: Path, judged: Sequence[Judged]) -> None:
    """A TSV file: a header (confidence, log_prob, chrf), then a row for each hypothesis in
    input order: its confidence (empty without a map, and for a blank source), its figure
    (empty for a blank source, and where the engine cannot score) and its sentence chrF."""

    def cell(value: float | None) -> str:
        return "" if value is None else f"{value:.4f}"

    rows = ["confidence\tlog_prob\tchrf"]
    rows += [f"{cell(j.confidence)}\t{cell(j.log_prob)}\t{j.chrf:.2f}" for j in judged]
    path.write_text("".join(row + "\n" for row in rows), encoding="utf-8")


def _aligned_files(
    translator: Translator, src: Path, ref: Path, src_text: list[str], ref_text: list[str]
) -> Iterator[EncodedSplit]:
    """The lines of the aligned files `src` and `ref`, encoded `EVAL_LINES` lines at a time as
    the chunks are taken (the ids of a long input are never all in memory)."""
    report = LoadReport(
        split="files", origin=f"{src}, {ref}", read=len(src_text), kept=len(src_text)
    )
    tokenizer, tag = translator.tokenizer, translator.settings.tag
    chunks = line_chunks(len(src_text), input_lines.EVAL_LINES)
    return (encode_split("files", src_text[c], ref_text[c], report, tokenizer, tag=tag)
            for c in chunks)  # fmt: skip


def translate_batches(
    translator: Translator, batches: Iterable[Sequence[str]]
) -> Iterator[list[str]]:
    """The translations of each batch of lines, one per line, batch by batch as the batches
    come; an empty line stays empty."""
    return _numbered(batches, translator.translate)


def translate_batches_nbest(
    translator: Translator, batches: Iterable[Sequence[str]], n_best: int
) -> Iterator[list[list[tuple[str, float]]]]:
    """The `n_best` best distinct (translation, score) pairs of each line, best first, batch by
    batch. With reranking, the whole beam is reranked and the scores are the combined ones."""

    def nbest(lines: Sequence[str], *, first_line: int) -> list[list[tuple[str, float]]]:
        return translator.nbest(lines, n_best, first_line=first_line)

    return _numbered(batches, nbest)


def translate_batches_judged(
    translator: Translator, batches: Iterable[Sequence[str]], n_best: int | None = None
) -> Iterator[list[dict]]:
    """`tfm translate --json`: for each line, batch by batch, an object with its source, its
    translation, the strategy's score and the confidence (None without a map: a warning says
    why, once); with `n_best`, also its list of that many translations, each with its score
    and confidence."""
    if (why := translator.no_confidence()) is not None:
        log.warning("confidence is null: %s", why)

    def judged(lines: Sequence[str], *, first_line: int) -> list[dict]:
        rows = []
        for line, rated in zip(lines, translator.rated(lines, n_best or 1, first_line=first_line),
                               strict=True):  # fmt: skip
            listed = [{"translation": r.translation, "score": round(r.score, 4),
                       "confidence": r.confidence} for r in rated]  # fmt: skip
            more = {"n_best": listed} if n_best else {}
            rows.append(json_safe({"source": line, **listed[0], **more}))
        return rows

    return _numbered(batches, judged)


def _numbered(batches: Iterable[Sequence[str]], translate: Callable[..., list]) -> Iterator[list]:
    """`translate(lines, first_line=N)` of each batch, N counting the lines from 1; at the end,
    logs how long translating took (waiting for input left out)."""
    first, seconds = 1, 0.0
    for lines in batches:
        started = time.perf_counter()
        translated = translate(lines, first_line=first)
        seconds += time.perf_counter() - started
        yield translated
        first += len(lines)
    log.info("translated %d line(s) in %.2f s (%.1f sentences/s)", first - 1, seconds,
             (first - 1) / max(seconds, 1e-9))  # fmt: skip

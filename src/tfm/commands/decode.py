"""`tfm eval` and `tfm translate`: a trained run (or ensemble, or reranked beam) decoding a
split, aligned files, or lines as they come."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from tfm.commands import input as input_lines
from tfm.commands.deployed import (
    evaluate_exported,
    is_exported,
    translate_exported,
    translate_exported_nbest,
)
from tfm.commands.input import line_chunks, read_aligned
from tfm.data.corpus import LoadReport
from tfm.data.pipeline import EncodedSplit, encode_split, prepare_splits
from tfm.errors import UsageError
from tfm.prediction.evaluate import evaluate_chunks
from tfm.prediction.opening import Decoding, open_decoding
from tfm.prediction.settings import DecodeRequest
from tfm.rundir.metrics import json_safe

log = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")


def evaluate_run(
    request: DecodeRequest,
    *,
    split: str = "test",
    src: Path | None = None,
    ref: Path | None = None,
    output: Path | None = None,
) -> tuple[dict, list[str]]:
    """Scores (and hypotheses in input order) of the requested run, ensemble or reranked beam
    on a split or on the aligned files `src` and `ref`; the hypotheses are also written to
    `output`, one per line, when given."""
    if (src is None) != (ref is None):
        raise UsageError("--src and --ref go together")
    if split not in SPLITS:
        raise UsageError(f"--split {split!r}: expected train, validation or test")
    if is_exported(request):
        return evaluate_exported(request, split=split, src=src, ref=ref, output=output)
    decoding = open_decoding(request)
    chunks: Iterable[EncodedSplit]
    if src is not None and ref is not None:
        chunks, name = _aligned_files(decoding, src, ref), str(src)
    else:
        config, tokenizer = decoding.trained.config, decoding.trained.tokenizer
        splits, _ = prepare_splits(config.data, config.tokenizer, (split,), tokenizer=tokenizer)
        chunks, name = [splits[split]], split
    reranker = decoding.reranker
    rerank = None if reranker is None else reranker.rerank
    scores, hypotheses = evaluate_chunks(
        decoding.model, decoding.trained.tokenizer, chunks, decoding.settings, rerank=rerank
    )
    if output is not None:
        output.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    header = {"run": str(decoding.trained.paths.root), "split": name, "step": decoding.trained.step}
    if request.ensemble:
        header["ensemble"] = [str(Path(other)) for other in request.ensemble]
    settings = decoding.settings
    options: dict[str, object] = {"beam_size": settings.beam_size}
    options["length_penalty"] = settings.length_penalty
    if reranker is not None:
        options["rerank_with"] = [str(Path(other)) for other in request.rerank_with]
        options["rerank_weight"] = reranker.weight
    return json_safe({**header, **options, **scores}), hypotheses  # NaN/inf scores as None


def _aligned_files(decoding: Decoding, src: Path, ref: Path) -> Iterator[EncodedSplit]:
    """The aligned files, checked whole now, then encoded `EVAL_LINES` lines at a time as the
    chunks are taken (the ids of a long input are never all in memory)."""
    src_text, ref_text = read_aligned(src, ref)
    report = LoadReport(
        split="files", origin=f"{src}, {ref}", read=len(src_text), kept=len(src_text)
    )
    tokenizer = decoding.trained.tokenizer
    chunks = line_chunks(len(src_text), input_lines.EVAL_LINES)
    return (encode_split("files", src_text[c], ref_text[c], report, tokenizer) for c in chunks)


def translate_batches(
    request: DecodeRequest,
    batches: Iterable[Sequence[str]],
) -> Iterator[list[str]]:
    """The translations of each batch of lines, one per line, batch by batch as the batches
    come; an empty line stays empty. The run is opened now, before the first batch is taken.
    An exported `--run` decodes with CTranslate2."""
    if is_exported(request):
        return translate_exported(request, batches)
    decoding = open_decoding(request)
    return _numbered(batches, decoding.translate)


def translate_batches_nbest(
    request: DecodeRequest,
    batches: Iterable[Sequence[str]],
    n_best: int,
) -> Iterator[list[list[tuple[str, float]]]]:
    """The `n_best` (translation, score) pairs of each line, best first, batch by batch; the
    beam is the requested one, else the config's but at least `n_best`. With reranking, the
    whole beam is reranked and the scores are the combined ones."""
    beam_size = request.beam_size
    if beam_size is not None and beam_size < n_best:
        raise UsageError(f"--n-best {n_best} needs --beam-size {n_best} or more, not {beam_size}")
    if is_exported(request):
        return translate_exported_nbest(request, batches, n_best)
    decoding = open_decoding(request, min_beam=n_best)
    return _numbered(
        batches, lambda lines, *, first_line: decoding.nbest(lines, n_best, first_line=first_line)
    )


def _numbered(batches: Iterable[Sequence[str]], translate) -> Iterator[list]:
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

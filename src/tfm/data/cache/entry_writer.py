"""Writing one data-cache entry (`tfm.data.cache.prepared_cache`) in bounded memory, whatever
the corpus size, in two calls: `write_texts` (the one read of the corpus), then `write_encoding`.

1. Read: the training split is streamed (`corpus.stream_split`), cleaned, and its sentences are
   appended to `{src,tgt}.text` chunk by chunk; on the way, the files' bytes are hashed (they
   name the entry), the characters seen collected and the corpus measured (`FigureCounter`).
   Where validation and test are held out of the corpus and not yet known, this read chooses
   them (`held_out.HoldingOut`): its pairs are written as read, then copied without the
   held-out ones into the entry's texts, which are collected and measured on the way.
2. Learn BPE (`entry_encoding`): on every pair when there are at most `tokenizer.train_sample`,
   so a small corpus gets exactly the tokenizer it always got; else on a seeded sample of that
   many pairs (the same sample every time), with every character of the whole split in the
   alphabet, so that no training sentence meets `<unk>`.
3. Encode (`entry_encoding`): the stored sentences, chunk by chunk, by `bulk_encoding` (the
   tokenizer's own ids, found faster) on every core for a big corpus (`parallel_encoding`),
   framed as `pipeline.encode_split` frames them and appended to `{src,tgt}.ids`.
Each phase shows a progress bar on stderr when it is a terminal. A full disk is a `DataError`
that says how much space the entry needs (`entry_files`); the space is checked before anything
is written.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from tfm.config import Config, TokenizerConfig
from tfm.data.cache.bulk_encoding import characters
from tfm.data.cache.cache_key import SIDES, VERSION, input_bytes
from tfm.data.cache.entry_encoding import CHUNK, learn_bpe, progress_bar, side_dtype, write_ids
from tfm.data.cache.entry_files import RowWriter, file_digests, no_space, no_space_left
from tfm.data.corpus import LoadReport
from tfm.data.corpus_figures import FigureCounter, TextFigures
from tfm.data.formats import Hashing
from tfm.data.held_out import HeldOut, HoldingOut, withhold
from tfm.data.ragged import OFFSETS, RaggedText
from tfm.data.related import training_stream
from tfm.data.tokenizer import Tokenizer
from tfm.errors import DataError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextsWritten:
    """What reading the corpus gave: its load report, the characters of each side, its figures,
    the disk space the entry needs, the time reading took, and the splits held out of it."""

    report: LoadReport
    alphabets: dict[str, set[str]]
    figures: TextFigures
    needed: int  # bytes the entry needs on disk, about
    seconds: float
    cpu_seconds: float
    held_out: HeldOut | None


def write_texts(
    config: Config, folder: Path, *, hashing: Hashing | None, progress: bool
) -> TextsWritten:
    """Step 1 into `folder` (new), the corpus's bytes told to `hashing`."""
    needed = 2 * input_bytes(config) + (16 << 20)  # texts, ids (at most ~2 bytes a character)
    free = shutil.disk_usage(folder.parent).free
    if free < needed:
        raise DataError(no_space(folder.parent, needed, free))
    folder.mkdir(parents=True)
    clock = _Clock()
    with no_space_left(folder.parent, needed):
        report, alphabets, figures, held = _write_texts(config, folder, hashing, progress=progress)
    clock.lap("read")
    return TextsWritten(report, alphabets, figures, needed, clock.seconds["read"],
                        clock.cpu_seconds["read"], held)  # fmt: skip


def write_encoding(
    settings: TokenizerConfig,
    folder: Path,
    texts: TextsWritten,
    parts: dict,
    *,
    tokenizer: Tokenizer | None,
    progress: bool,
) -> dict:
    """Steps 2 and 3 into `folder` (where `write_texts` wrote) with the tokenizer `settings`
    (the vocabulary size resolved), or `tokenizer` when given; the entry's metadata (meta.json),
    `parts` among it."""
    with no_space_left(folder.parent, texts.needed):
        meta = _write(settings, folder, texts, parts, tokenizer=tokenizer, progress=progress)
    return {**meta, "digests": file_digests(folder)}


def _write(
    settings: TokenizerConfig,
    folder: Path,
    texts: TextsWritten,
    parts: dict,
    *,
    tokenizer: Tokenizer | None,
    progress: bool,
) -> dict:
    clock = _Clock()
    stored = {side: RaggedText.open(folder / side) for side in SIDES}
    if tokenizer is None:
        tags = tuple(parts["tokenizer"].get("tags", ()))
        tokenizer = learn_bpe(stored, settings, texts.alphabets, tags=tags, progress=progress)
    tokenizer.save(folder)
    clock.lap("bpe")
    tokens = write_ids(stored, tokenizer, folder, progress=progress)
    clock.lap("encode")
    seconds = {"read": texts.seconds, **clock.seconds}
    cpu = {"read": texts.cpu_seconds, **clock.cpu_seconds}
    report = texts.report
    log.info(
        "train: prepared %s pairs in %.1f s (reading %.1f s, BPE %.1f s, encoding %.1f s; "
        "%.1f s of CPU)", f"{report.kept:,}", sum(seconds.values()), seconds["read"],
        seconds["bpe"], seconds["encode"], sum(cpu.values()),
    )  # fmt: skip
    return {
        "version": VERSION,
        "parts": parts,
        "pairs": report.kept,
        "read": report.read,
        "dropped": report.dropped,
        "origin": report.origin,
        "unit": report.unit,
        "corpora": report.corpora,  # several corpora: the pairs each kept (once), times read
        "notes": report.notes,  # why a corpus is read as it is (related pairs)
        "skipped": report.skipped,  # read indices of the pairs dropped (empty or too long sides)
        "first": report.first,  # first lines of each reason
        "characters": report.characters,  # control and replacement characters (screening)
        "figures": texts.figures.record(),  # the raw pairs measured (the recipe's)
        "dtypes": {side: str(side_dtype(tokenizer, side)) for side in SIDES},
        "tokens": tokens,
        "tokenizer_fingerprint": tokenizer.fingerprint(),
        "seconds": {phase: round(s, 2) for phase, s in seconds.items()},
        "cpu_seconds": {phase: round(s, 2) for phase, s in cpu.items()},
    }


class _Clock:
    """Wall-clock and CPU seconds of consecutive phases: every thread of this process and of the
    worker processes it has waited for."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}
        self._wall, self._cpu = time.perf_counter(), _cpu()

    def lap(self, phase: str) -> None:
        wall, cpu = time.perf_counter(), _cpu()
        self.seconds[phase], self.cpu_seconds[phase] = wall - self._wall, cpu - self._cpu
        self._wall, self._cpu = wall, cpu


def _cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _write_texts(
    config: Config, folder: Path, hashing: Hashing | None, *, progress: bool
) -> tuple[LoadReport, dict[str, set[str]], TextFigures, HeldOut | None]:
    """Step 1: the cleaned training pairs into `{src,tgt}.text`; their characters, per side,
    their figures, and the splits held out of them."""
    data = config.data
    held = withhold(data)
    pairs, report = training_stream(
        data,
        control_chars="count",  # kept in meta.json; every run that maps the entry reports it
        hashing=hashing,
        withhold=held,
    )
    with progress_bar(progress, desc="reading train", unit=" pairs", unit_scale=True) as bar:
        counted = _counted(pairs, bar)
        if not isinstance(held, HoldingOut):
            measured = _store(counted, folder)
            return report(), *measured, held
        _store(counted, folder / "read", measure=False)  # the held-out pairs known at its end
    read = report()
    measured = _store(_rows_without(folder / "read", held.rows), folder)
    shutil.rmtree(folder / "read")
    return read, *measured, held.found


def _counted(chunks: Iterable[list[tuple[str, str]]], bar: tqdm) -> Iterator[list[tuple[str, str]]]:
    for chunk in chunks:
        yield chunk
        bar.update(len(chunk))


def _store(
    chunks: Iterable[list[tuple[str, str]]], folder: Path, *, measure: bool = True
) -> tuple[dict[str, set[str]], TextFigures]:
    """`chunks` of pairs into `folder/{src,tgt}.text` (`folder` made here where it is not);
    with `measure`, their characters per side and their figures."""
    folder.mkdir(exist_ok=True)
    writers = [RowWriter(folder / f"{s}.text", folder / f"{s}.text-offsets.npy") for s in SIDES]
    alphabets: dict[str, set[str]] = {side: set() for side in SIDES}
    counter = FigureCounter()
    for chunk in chunks:
        sides = list(zip(*chunk, strict=True))
        if measure:
            counter.add(sides[0], sides[1])
        for side, writer, texts in zip(SIDES, writers, sides, strict=True):
            encoded = [text.encode("utf-8") for text in texts]
            writer.add(b"".join(encoded), np.fromiter(map(len, encoded), dtype=OFFSETS))
            if measure:
                alphabets[side].update(characters(unicodedata.normalize("NFC", "".join(texts))))
    for writer in writers:
        writer.close()
    return alphabets, counter.figures()


def _rows_without(folder: Path, rows: list[int]) -> Iterator[list[tuple[str, str]]]:
    """The pairs `_store` wrote into `folder`, `CHUNK` at a time, less those at `rows`."""
    texts = [RaggedText.open(folder / side) for side in SIDES]
    left_out = set(rows)
    for start in range(0, len(texts[0]), CHUNK):
        chunk = zip(*(side.read(start, start + CHUNK) for side in texts), strict=True)
        kept = [pair for i, pair in enumerate(chunk, start) if i not in left_out]
        if kept:
            yield kept

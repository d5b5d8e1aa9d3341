"""Writing one data-cache entry (`tfm.data.cache.prepared_cache`) in bounded memory, whatever
the corpus size, in two calls: `write_texts` (the one read of the corpus), then `write_encoding`.

1. Read: the training split is streamed (`corpus.stream_split`), cleaned, and its sentences are
   appended to `{src,tgt}.text` chunk by chunk; on the way, the files' bytes are hashed (they
   name the entry), the characters seen collected and the corpus measured (`FigureCounter`).
   Where validation and test are held out of the corpus and not yet known, this read chooses
   them (`held_out.HoldingOut`): its pairs are written as read, then copied without the
   held-out ones into the entry's texts, which are collected and measured on the way.
2. Learn BPE: on every pair when there are at most `tokenizer.train_sample`, so a small corpus
   gets exactly the tokenizer it always got; else on a seeded sample of that many pairs (the same
   sample every time), with every character of the whole split in the alphabet, so that no
   training sentence meets `<unk>`.
3. Encode: the stored sentences, chunk by chunk, by `bulk_encoding` (the tokenizer's own ids,
   found faster) on every core for a big corpus (`parallel_encoding`), framed as
   `pipeline.encode_split` frames them and appended to `{src,tgt}.ids`.
Each phase shows a progress bar on stderr when it is a terminal. A full disk is a `DataError`
that says how much space the entry needs; the space is checked before anything is written.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import logging
import os
import shutil
import sys
import time
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from tqdm import tqdm

from tfm.config import Config, TokenizerConfig, planned
from tfm.data.cache.bulk_encoding import characters
from tfm.data.cache.cache_key import SIDES, VERSION, input_bytes
from tfm.data.cache.parallel_encoding import Encoding, workers_for
from tfm.data.corpus import LoadReport, stream_training
from tfm.data.corpus_figures import FigureCounter, TextFigures
from tfm.data.formats import Hashing
from tfm.data.held_out import HeldOut, HoldingOut, withhold
from tfm.data.interruptible import interruptibly
from tfm.data.ragged import OFFSETS, RaggedText, id_dtype
from tfm.data.tokenizer import BOS_ID, EOS_ID, UNK_ID, Tokenizer, train_tokenizer
from tfm.errors import DataError

log = logging.getLogger(__name__)

CHUNK = 20_000  # pairs encoded and written at a time (read: `formats.CHUNK`)
SAMPLE_SEED = 0  # of the BPE training sample: fixed, so the same data gives the same tokenizer


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
        raise DataError(_no_space(folder.parent, needed, free))
    folder.mkdir(parents=True)
    clock = _Clock()
    with _no_space_left(folder.parent, needed):
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
    with _no_space_left(folder.parent, texts.needed):
        meta = _write(settings, folder, texts, parts, tokenizer=tokenizer, progress=progress)
    return {**meta, "digests": file_digests(folder)}


class _no_space_left:
    """A full disk met while writing is a DataError that says how much space the entry needs."""

    def __init__(self, root: Path, needed: int) -> None:
        self.root, self.needed = root, needed

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, traceback) -> None:
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise DataError(_no_space(self.root, self.needed, None)) from None


def file_digests(folder: Path) -> dict[str, str]:
    """The SHA-256 of each file in `folder` (an entry's, before meta.json is written)."""
    digests = {}
    for path in sorted(folder.iterdir()):
        with path.open("rb") as file:
            digests[path.name] = hashlib.file_digest(file, "sha256").hexdigest()
    return digests


def changed_files(folder: Path, digests: dict[str, str]) -> str | None:
    """The first file of `folder` whose content is not the one `digests` recorded, or None;
    OSError for a missing one."""
    for name, digest in digests.items():
        with (folder / name).open("rb") as file:
            if hashlib.file_digest(file, "sha256").hexdigest() != digest:
                return name
    return None


def _no_space(root: Path, needed: int, free: int | None) -> str:
    have = f", {_size(free)} are free" if free is not None else " and the disk is full"
    return (
        f"data.cache_dir {root}: preparing the training split needs about {_size(needed)}"
        f"{have}; free some space or set data.cache_dir to a folder on a larger disk"
    )


def _size(n_bytes: int) -> str:
    """A size in the unit that shows it: GB from 1 GB up, MB from 1 MB up, else kB."""
    if n_bytes >= 1e9:
        return f"{n_bytes / 1e9:.1f} GB"
    if n_bytes >= 1e6:
        return f"{n_bytes / 1e6:.1f} MB" if n_bytes < 1e7 else f"{n_bytes / 1e6:.0f} MB"
    return f"{n_bytes / 1e3:.0f} kB"


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
        tokenizer = _learn(stored, settings, texts.alphabets, tags=tags, progress=progress)
    tokenizer.save(folder)
    clock.lap("bpe")
    tokens = _write_ids(stored, tokenizer, folder, progress=progress)
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
        "skipped": report.skipped,  # read indices of the pairs dropped (empty or too long sides)
        "first": report.first,  # first lines of each reason
        "characters": report.characters,  # control and replacement characters (screening)
        "figures": texts.figures.record(),  # the raw pairs measured (the recipe's)
        "dtypes": {side: str(id_dtype(_vocab_size(tokenizer, side))) for side in SIDES},
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


def _vocab_size(tokenizer: Tokenizer, side: str) -> int:
    return tokenizer.src_vocab_size if side == "src" else tokenizer.tgt_vocab_size


class RowWriter:
    """Appends rows of bytes to `path` and writes their offsets to `offsets` when closed."""

    def __init__(self, path: Path, offsets: Path) -> None:
        self.file: BinaryIO = path.open("wb")
        self.offsets_path, self.ends, self.total = offsets, [np.zeros(1, dtype=OFFSETS)], 0

    def add(self, data: bytes, lengths: np.ndarray) -> None:
        self.file.write(data)
        ends = self.total + np.cumsum(lengths, dtype=OFFSETS)
        self.ends.append(ends)
        self.total = int(ends[-1]) if len(ends) else self.total

    def close(self) -> None:
        self.file.close()
        np.save(self.offsets_path, np.concatenate(self.ends))


def _bar(progress: bool, **kwargs) -> tqdm:
    """A progress bar on stderr, shown when asked for and stderr is a terminal."""
    return tqdm(disable=None if progress else True, dynamic_ncols=True, leave=False, **kwargs)


def _write_texts(
    config: Config, folder: Path, hashing: Hashing | None, *, progress: bool
) -> tuple[LoadReport, dict[str, set[str]], TextFigures, HeldOut | None]:
    """Step 1: the cleaned training pairs into `{src,tgt}.text`; their characters, per side,
    their figures, and the splits held out of them."""
    data = config.data
    held = withhold(data)
    pairs, report = stream_training(
        data,
        control_chars="count",  # kept in meta.json; every run that maps the entry reports it
        hashing=hashing,
        withhold=held,
    )
    with _bar(progress, desc="reading train", unit=" pairs", unit_scale=True) as bar:
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


def _learn(
    texts: dict[str, RaggedText],
    settings: TokenizerConfig,
    alphabets: dict[str, set[str]],
    *,
    tags: tuple[str, ...],
    progress: bool,
) -> Tokenizer:
    """Step 2: BPE on every pair, or on a seeded sample of `settings.train_sample` pairs."""
    n, sample = len(texts["src"]), settings.train_sample

    def learn(src, tgt, **alphabets) -> Tokenizer:  # interruptible by SIGINT and SIGTERM
        work = functools.partial(
            train_tokenizer, src, tgt,
            vocab_size=planned(settings.vocab_size, "tokenizer.vocab_size"),
            min_frequency=settings.min_frequency,
            joint=settings.joint,
            byte_fallback=settings.byte_fallback,
            tags=tags,
            progress=progress and sys.stderr.isatty(),  # the trainer's bars, on a terminal only
            **alphabets,
        )  # fmt: skip
        return interruptibly(work)

    if sample is None or n <= sample:
        log.info("learning BPE from the %s training pairs", f"{n:,}")
        return learn(texts["src"], texts["tgt"])
    index = np.sort(np.random.default_rng(SAMPLE_SEED).choice(n, size=sample, replace=False))
    log.info("learning BPE from a sample of %s of the %s training pairs", f"{sample:,}", f"{n:,}")
    src, tgt = (list(texts[side].subset(index)) for side in SIDES)
    for side in SIDES:
        texts[side].release()  # the sample's rows are spread over every page of the files
    chars = {side: sorted(c for c in alphabets[side] if not c.isspace()) for side in SIDES}
    return learn(src, tgt, alphabets=chars)


def _write_ids(
    texts: dict[str, RaggedText], tokenizer: Tokenizer, folder: Path, *, progress: bool
) -> dict[str, int]:
    """Step 3: every sentence encoded and framed into `{src,tgt}.ids`; tokens per side, framing
    included, and `<unk>` tokens ("src_unknown", "tgt_unknown")."""
    models = dict(zip(SIDES, tokenizer.bpe_models, strict=True))
    tokens = {}
    workers = workers_for(len(texts["src"]))
    with Encoding(models, folder, workers=workers) as encoding:
        for side in SIDES:
            dtype = id_dtype(_vocab_size(tokenizer, side))
            writer = RowWriter(folder / f"{side}.ids", folder / f"{side}.ids-offsets.npy")
            unknown, total = 0, 0
            with _bar(progress, desc=f"encoding {side}", total=len(texts[side]),
                      unit=" sentences", unit_scale=True) as bar:  # fmt: skip
                for flat, lengths in encoding.chunks(side, size=CHUNK):
                    unknown += int(np.count_nonzero(flat == UNK_ID))
                    framed, framed_lengths = frame(flat.astype(dtype), lengths, bos=side == "tgt")
                    writer.add(framed.tobytes(), framed_lengths.astype(OFFSETS))
                    total += len(framed)
                    bar.update(len(lengths))
            writer.close()
            tokens[side], tokens[f"{side}_unknown"] = total, unknown
            if unknown:
                log.warning("%d %s token(s) of the training split are <unk>", unknown, side)
    return tokens


def frame(flat: np.ndarray, lengths: np.ndarray, *, bos: bool) -> tuple[np.ndarray, np.ndarray]:
    """Rows of `flat` (lengths `lengths`) as `ids + [EOS]`, or `[BOS] + ids + [EOS]` with `bos`;
    the framed values and lengths."""
    framed_lengths = lengths + (2 if bos else 1)
    ends = np.cumsum(framed_lengths)
    out = np.empty(int(ends[-1]) if len(ends) else 0, dtype=flat.dtype)
    ids = np.ones(len(out), dtype=bool)
    ids[ends - 1] = False
    out[ends - 1] = EOS_ID
    if bos:
        starts = ends - framed_lengths
        ids[starts] = False
        out[starts] = BOS_ID
    out[ids] = flat
    return out, framed_lengths

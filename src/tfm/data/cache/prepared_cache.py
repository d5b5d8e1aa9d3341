"""The data cache: the training split prepared once (tokenizer, token ids, texts) and memory-mapped.

    entry = prepared_entry(config)           # prepares it on the first call, maps it after
    train = entry.split(max_length=128)      # EncodedSplit over RaggedIds / RaggedText
    entry.figures()                          # the raw pairs measured (the recipe's figures)

An entry is the folder `<data.cache_dir>/<key>`. The key is a hash of what decides its content
(`cache_key`): the bytes of the training files (for `text`, `tsv`, `jsonl`; the cleaned pairs
for `toy`, `hub` and `disk`), how they are read (format, columns, fields, languages) and the
tokenizer settings. Where the files are does not count: a moved corpus is still a hit; an edited
line is a miss. A config without `tokenizer.vocab_size` gets the size `tfm.data.vocabulary`
derives from the corpus's figures, which are kept under the corpus's own key
(`corpus-<key>.json`), with the validation and test pairs held out of it (`tfm.data.held_out`),
so that a run on a prepared corpus reads its held-out splits from there (`corpus_record`).

Preparing reads the corpus once: one pass hashes the files, holds out validation and test,
measures the pairs and writes their texts; BPE and the ids follow from what it wrote. The
files' digests are remembered by their size, change times and inode
(`cache_key.ContentDigests`), so a later run on unchanged files finds its entry, and its
held-out splits, without reading them.
`data.max_length` is not in the key either: the entry holds every cleaned pair and the length
filter is applied when it is opened. The folder holds `tokenizer.json`, `{src,tgt}.ids` (framed
ids, `id_dtype`), `{src,tgt}.text` (UTF-8), their `*-offsets.npy` and `meta.json`, written last,
with the SHA-256 of each other file: an entry whose files changed (a damaged disk, an edit) is
prepared again, so training never reads ids that are not the tokenizer's.

Processes share it safely: one prepares an entry while holding `<key>.lock` (a file lock) and
renames the finished folder into place; any other that asks for the same key (another rank
under torchrun, a second run, `tfm data prepare`) waits for the lock and then maps the result.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

from filelock import FileLock, Timeout

from tfm.config import Config
from tfm.data.cache.cache_entry import META, CacheEntry, open_entry
from tfm.data.cache.cache_folder import cache_root, scratch_folder
from tfm.data.cache.cache_key import ContentDigests, CorpusKey, corpus_key
from tfm.data.cache.corpus_record import restore_held_out, stored_figures, write_corpus_record
from tfm.data.cache.entry_writer import write_encoding, write_texts
from tfm.data.corpus import LoadReport
from tfm.data.formats import CHUNK
from tfm.data.pipeline import EncodedSplit, prepare_splits
from tfm.data.screening import report_characters
from tfm.data.tokenizer import Tokenizer, untagged
from tfm.data.vocabulary import vocabulary_for
from tfm.errors import DataError

log = logging.getLogger(__name__)

LONG_SHARE = 0.01  # of the training pairs too long to train on: a warning, not an info line
OVERLAP_SHARE = 0.01  # of the validation (or test) sources that are training sources too


def prepared_entry(
    config: Config,
    *,
    tokenizer: Tokenizer | None = None,
    progress: bool = True,
    announce: bool = True,
) -> CacheEntry:
    """The config's cache entry, prepared first if no process has (see the module docstring);
    with `announce`, its load report and folder are logged (training logs them itself, once
    the length filter has had its say, and reports the entry's control characters).

    With `tokenizer` (a resumed run's), the entry must hold ids of that very tokenizer: the one
    the key names is used when it does, else one prepared with `tokenizer` beside it.
    """
    root = cache_root(config)
    digests = ContentDigests(root)
    found = corpus_key(config, digests)
    entry = None if found is None else _cached(config, root, found, tokenizer)
    if entry is None:
        entry = _prepare(config, root, digests, tokenizer=tokenizer, progress=progress)
    else:
        assert found is not None  # an entry is found by its key
        restore_held_out(config, root, found)
        if found.origin is not None:  # a moved corpus: where it is now
            entry = replace(entry, meta={**entry.meta, "origin": found.origin})
    if announce:
        log.info("%s (%s)", entry.report().summary(), entry.where())
    return entry


def _cached(
    config: Config, root: Path, found: CorpusKey, tokenizer: Tokenizer | None
) -> CacheEntry | None:
    """The entry the cache holds for `found`, without reading the corpus, or None."""
    vocab = config.tokenizer.vocab_size
    if vocab is None:
        figures = stored_figures(root, found.corpus)
        if figures is None:
            return None
        vocab = vocabulary_for(figures)[0]
    return _entry_at(root, found.entry(vocab)[0], tokenizer)[1]


def _entry_at(root: Path, key: str, tokenizer: Tokenizer | None) -> tuple[str, CacheEntry | None]:
    """`key` and its entry (None if not prepared), or, where the one at `key` holds another
    tokenizer's ids, the key of the entry beside it that holds `tokenizer`'s, and that entry."""
    entry = open_entry(root / key)
    if tokenizer is None or entry is None:
        return key, entry
    if entry.meta["tokenizer_fingerprint"] == tokenizer.fingerprint():
        return key, entry
    key = f"{key}-{tokenizer.fingerprint()[:8]}"
    return key, open_entry(root / key)


def _prepare(
    config: Config,
    root: Path,
    digests: ContentDigests,
    *,
    tokenizer: Tokenizer | None,
    progress: bool,
) -> CacheEntry:
    """Read the corpus once into a new folder, then, under the lock of the key that reading
    gives, write its BPE and ids there and move it into place, unless another process has."""
    made = not root.exists()
    folder = scratch_folder(root, ".tmp")
    try:
        texts = write_texts(config, folder, hashing=digests, progress=progress)
        digests.remember()
        found = corpus_key(config, digests, read=True)
        assert found is not None  # every file was read
        write_corpus_record(root, found.corpus, texts.figures, texts.held_out)
        vocab = config.tokenizer.vocab_size or vocabulary_for(texts.figures)[0]
        key, parts = found.entry(vocab)
        key = _entry_at(root, key, tokenizer)[0]
        lock = root / f"{key}.lock"
        lock.touch()
        with _locked(lock, root / key):
            if (entry := open_entry(root / key)) is not None:
                return entry
            shutil.rmtree(root / key, ignore_errors=True)  # left by a failed attempt
            settings = config.tokenizer.model_copy(update={"vocab_size": vocab})
            meta = write_encoding(settings, folder, texts, parts, tokenizer=tokenizer,
                                  progress=progress)  # fmt: skip
            meta["key"] = key
            (folder / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
            os.replace(folder, root / key)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if made:
            with contextlib.suppress(OSError):  # a first preparation that failed leaves no cache
                root.rmdir()
    entry = open_entry(root / key)
    if entry is None:
        raise DataError(f"{root / key}: the prepared data cannot be read back")
    return replace(entry, written=True)


class _locked:
    """Hold `lock`, saying once that this process waits when another holds it."""

    def __init__(self, lock: Path, folder: Path) -> None:
        self.lock, self.folder = FileLock(lock), folder

    def __enter__(self) -> None:
        try:
            self.lock.acquire(timeout=0)
        except Timeout:
            log.info("waiting for another process to prepare %s", self.folder)
            self.lock.acquire()

    def __exit__(self, *exc) -> None:
        self.lock.release()


def warn_long_pairs(report: LoadReport, max_length: int) -> None:
    """A warning where `LONG_SHARE` or more of the training pairs are too long to train on: a
    corpus of long sentences (or a low `data.max_length`) loses a part of its data unseen."""
    long = report.dropped.get("too long", 0)
    if report.read and long >= LONG_SHARE * report.read:
        log.warning(
            "train: %s of %s pairs (%s) have more than data.max_length=%d BPE tokens on a side "
            "and are left out of training; raise data.max_length to train on them",
            f"{long:,}", f"{report.read:,}", f"{long / report.read:.1%}", max_length,
        )  # fmt: skip


def warn_validation_in_train(entry: CacheEntry, validation: EncodedSplit) -> None:
    """A warning where `OVERLAP_SHARE` or more of the validation's sources are sources of the
    training corpus too (read `CHUNK` at a time): its scores are then optimistic, and best.pt
    and early stopping follow what training has seen."""
    sources = list(validation.src_text)
    wanted, seen = set(sources), set()
    train, tags = entry.texts("src"), entry.tokenizer().tags
    for start in range(0, len(train), CHUNK):
        rows = train.read(start, start + CHUNK)
        seen.update(wanted.intersection(untagged(rows, tags) if tags else rows))
    shared = sum(text in seen for text in sources)
    if sources and shared >= OVERLAP_SHARE * len(sources):
        log.warning(
            "data.validation: %s of its %s sources (%s) are training sources too: its scores "
            "will be optimistic, and best.pt and early stopping follow what training has seen; "
            "hold out pairs that training does not read",
            f"{shared:,}", f"{len(sources):,}", f"{shared / len(sources):.0%}",
        )  # fmt: skip


def training_splits(
    config: Config,
    *,
    tokenizer: Tokenizer | None = None,
    entry: CacheEntry | None = None,
    validation: EncodedSplit | None = None,
) -> tuple[dict[str, EncodedSplit], Tokenizer, str]:
    """The training split from the cache (`entry`, or the config's, prepared if needed), the
    validation split encoded in memory (`validation` where a plan has read it; it is small, and
    its texts are needed for scoring), the tokenizer (`tokenizer`, or the entry's) and the
    training data's fingerprint for exact resume."""
    start = time.perf_counter()
    if entry is None:
        entry = prepared_entry(config, tokenizer=tokenizer, announce=False)
    report_characters(entry.meta.get("characters"), split="train", policy=config.data.control_chars)
    tokenizer = tokenizer if tokenizer is not None else entry.tokenizer()
    train = entry.split(max_length=config.data.max_length)
    log.info("%s (%s)", train.report.summary(), entry.where())  # once, every drop
    warn_long_pairs(train.report, config.data.max_length)
    if validation is None:
        splits, _ = prepare_splits(config.data, config.tokenizer, ("validation",),
                                   tokenizer=tokenizer)  # fmt: skip
        validation = splits["validation"]
    warn_validation_in_train(entry, validation)
    log.info("data ready in %.1f s", time.perf_counter() - start)
    return (
        {"train": train, "validation": validation},
        tokenizer,
        entry.fingerprint(config.data.max_length),
    )

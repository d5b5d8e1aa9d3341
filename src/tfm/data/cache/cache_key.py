"""The identity of a training split by content: the data cache's keys.

A key hashes what decides an entry's content: the bytes of the training files (for `text`,
`tsv`, `jsonl`; the cleaned pairs for `toy`, `hub` and `disk`), how they are read (format,
columns, fields, languages) and the tokenizer settings that shape the vocabulary. The files'
paths are not in it, so a moved corpus keeps its key, and any edited byte changes it. The
corpus key leaves the vocabulary size out: it names what the corpus's figures (which size the
vocabulary where the config does not) are kept under.

A training file is hashed as the pass that prepares it reads it (`ContentDigests`), and its
digest is remembered beside the cache by the file's size, change times and inode, so that a
later run on the unchanged file names its entry without reading it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from tfm.atomic import atomic_write_text
from tfm.config import Config, DataConfig, SourceConfig
from tfm.data.corpus import stream_split
from tfm.data.formats import files_read
from tfm.data.held_out import held_out_splits
from tfm.data.related import MAIN_SHARE

VERSION = 2  # of the cache's folder layout; another version is another key
SIDES = ("src", "tgt")  # the file stems of an entry's two sides
DIGESTS = "files.json"  # in the cache's root: each training file's digest, by its stat

# The tokenizer settings that shape the vocabulary; the rest act in training.
TOKENIZER_KEYS = ("vocab_size", "min_frequency", "joint", "byte_fallback", "train_sample")


@dataclass(frozen=True)
class CorpusKey:
    """What an entry's content depends on (`parts`, the vocabulary size as the config gives it,
    or None), the corpus's own key (`corpus`: without the vocabulary size), what a
    file-format source reads (`origin`, as the load report names it), and what the first
    corpus, which validation and test are held out of, reads where it is one (`first`)."""

    corpus: str
    parts: dict
    origin: str | None
    first: str | None = None

    def entry(self, vocab_size: int) -> tuple[str, dict]:
        """The entry's key with the vocabulary size `vocab_size`, and its parts."""
        parts = {**self.parts, "tokenizer": {**self.parts["tokenizer"], "vocab_size": vocab_size}}
        return _hash(parts), parts


class ContentDigests:
    """The SHA-256 of each training file: computed from the blocks a reading pass tells it
    (`update`, the `formats.Hashing` of `stream_split`), and remembered in `root/files.json`
    by each file's size, change times and inode (`known`)."""

    def __init__(self, root: Path) -> None:
        self.path = root / DIGESTS
        self.reading: dict[Path, tuple[hashlib._Hash, int]] = {}

    def update(self, path: Path, block: bytes) -> None:
        digest, size = self.reading.get(path) or (hashlib.sha256(), 0)
        digest.update(block)
        self.reading[path] = (digest, size + len(block))

    def known(self, path: Path) -> tuple[str, int] | None:
        """The digest and size of `path` as remembered, where the file has not changed since."""
        record = self._remembered().get(str(path.resolve()))
        if record is None or record != _stat(path, record):
            return None
        return record["sha256"], record["size"]

    def read(self, path: Path) -> tuple[str, int]:
        """The digest and size of `path` as this process read it."""
        digest, size = self.reading[path]
        return digest.hexdigest(), size

    def remember(self) -> None:
        """Keep the digests of the files read (a file changed since is not kept)."""
        remembered = self._remembered()
        for path, (digest, size) in self.reading.items():
            record = _stat(path, {"sha256": digest.hexdigest()})
            if record is not None and record["size"] == size:
                remembered[str(path.resolve())] = record
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(json.dumps(remembered, indent=0, sort_keys=True) + "\n", self.path)

    def _remembered(self) -> dict:
        try:
            found = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}


def _stat(path: Path, record: dict | None) -> dict | None:
    """`record`'s digest with the file's size, change times and inode now (None: no file)."""
    if record is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return {"sha256": record.get("sha256"), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "ctime_ns": stat.st_ctime_ns, "inode": stat.st_ino}  # fmt: skip


def corpus_key(config: Config, digests: ContentDigests, *, read: bool = False) -> CorpusKey | None:
    """The key of the config's training corpora and tokenizer settings, by content: the files'
    digests as remembered (None where one is not), or, with `read`, as this process read them."""
    data = config.data
    main_langs = {"src_lang": data.src_lang, "tgt_lang": data.tgt_lang}
    contents, origins = [], []
    corpora = data.training_corpora()
    for one in corpora:
        source, langs = one.source, {"src_lang": one.src_lang, "tgt_lang": one.tgt_lang}
        files = source_files(source, **langs)
        if files is None:  # toy, hub, disk: the cleaned pairs themselves
            contents.append(_hash_pairs(config, source, **langs))
            continue
        found = [digests.read(path) if read else digests.known(path) for path in files]
        if any(f is None for f in found):
            return None
        contents.append(_hash([list(f) for f in found if f is not None]))
        origins.append(stream_split(  # the origin as the reader names it; nothing is read
            source, split="train", toy=data.toy, src_lang=one.src_lang, tgt_lang=one.tgt_lang
        )[1].origin)  # fmt: skip
    settings = config.tokenizer.model_dump(mode="json")
    tokenizer = {k: settings[k] for k in TOKENIZER_KEYS}
    if tags := data.tags():
        tokenizer["tags"] = list(tags)
    sources = [c.source.model_dump(mode="json", exclude={"path", "pairs"}) for c in corpora]
    parts = {
        "version": VERSION,
        "langs": [data.src_lang, data.tgt_lang],
        "source": sources[0] if len(sources) == 1 else sources,
        "content": contents[0] if len(contents) == 1 else contents,
    }
    if held := {split: getattr(data, split).pairs for split in held_out_splits(data)}:
        parts["held_out"] = held  # the training split is the corpus without them
    if data.related:
        # each corpus's languages and tags, and the main pair's validation and test sentences,
        # which the related corpora leave out
        parts["related"] = [[c.src_lang, c.tgt_lang, *c.tags] for c in corpora]
        parts["guarded_by"] = _guarded_by(data)
        parts["main_share"] = data.main_share or MAIN_SHARE
    corpus = {**parts, "tokenizer": {k: v for k, v in tokenizer.items() if k != "vocab_size"}}
    origin = origins[0] if len(corpora) == 1 and origins else None
    first = origins[0] if source_files(data.corpus, **main_langs) is not None else None
    return CorpusKey(_hash(corpus), {**parts, "tokenizer": tokenizer}, origin, first)


def _guarded_by(data: DataConfig) -> list:
    """What decides the main pair's validation and test sentences beside the training corpus
    (the related corpora leave them out): each split's source and its files' digests."""
    found: list = []
    for split in ("validation", "test"):
        source = getattr(data, split)
        files = source_files(source, src_lang=data.src_lang, tgt_lang=data.tgt_lang) or []
        digests = []
        for path in files:
            with path.open("rb") as file:  # validation and test files are small
                digests.append(hashlib.file_digest(file, "sha256").hexdigest())
        found.append([source.model_dump(mode="json", exclude={"path"}), digests])
    return found


def input_bytes(config: Config) -> int:
    """The size of the training files, each as often as it is read (0 where none is)."""
    total = 0
    for corpus in config.data.training_corpora():
        files = source_files(corpus.source, src_lang=corpus.src_lang, tgt_lang=corpus.tgt_lang)
        total += corpus.source.repeat * sum(os.path.getsize(f) for f in files or [] if f.is_file())
    return total


def source_files(source: SourceConfig, *, src_lang: str, tgt_lang: str) -> list[Path] | None:
    """The files a file-format source reads (in source, target order), or None for the others."""
    files = files_read(source.format, source.path or "", key="", src_lang=src_lang,
                       tgt_lang=tgt_lang)  # fmt: skip
    return [path for path, _ in files] or None


def _hash(value: object) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def _hash_pairs(config: Config, source: SourceConfig, *, src_lang: str, tgt_lang: str) -> str:
    pairs, _ = stream_split(
        source, split="train", src_lang=src_lang, tgt_lang=tgt_lang, toy=config.data.toy
    )
    digest = hashlib.sha256()
    for chunk in pairs:
        for src, tgt in chunk:
            digest.update(json.dumps([src, tgt], ensure_ascii=False).encode() + b"\n")
    return digest.hexdigest()

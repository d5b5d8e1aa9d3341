"""The identity of a training split by content: the data cache's key.

The key hashes what decides an entry's content: the bytes of the training files (for `text`,
`tsv`, `jsonl`; the cleaned pairs for `toy`, `hub` and `disk`), how they are read (format,
columns, fields, languages) and the tokenizer settings that shape the vocabulary. The files'
paths are not in it, so a moved corpus keeps its key, and any edited byte changes it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from tfm.config import Config, SourceConfig
from tfm.data.corpus import stream_split
from tfm.data.formats import text_files

VERSION = 1  # of the cache's folder layout; another version is another key
SIDES = ("src", "tgt")  # the file stems of an entry's two sides
_HASH_BLOCK = 1 << 22


@dataclass(frozen=True)
class CacheKey:
    """What an entry's content depends on (`parts`), its hash (`key`), and the input size."""

    key: str
    parts: dict
    input_bytes: int  # of the training files, or of the cleaned pairs' text
    origin: str | None  # what a file-format source reads, as the load report names it


def cache_key(config: Config) -> CacheKey:
    """The key of the config's training split and tokenizer settings, by content."""
    data, source = config.data, config.data.train
    files = source_files(source, src_lang=data.src_lang, tgt_lang=data.tgt_lang)
    content, origin = hashlib.sha256(), None
    if files is not None:
        pairs, cleaner = stream_split(  # nothing is read until the pairs are asked for
            source, split="train", src_lang=data.src_lang, tgt_lang=data.tgt_lang, toy=data.toy
        )
        if not all(path.is_file() for path in files):
            next(pairs)  # the reader's own error: the file, and the config key to fix
        size = sum(_hash_file(content, path) for path in files)
        origin = cleaner.origin
    else:  # toy, hub, disk: the cleaned pairs themselves
        size = _hash_pairs(content, config)
    reading = source.model_dump(mode="json", exclude={"path"})
    tokenizer = config.tokenizer.model_dump(mode="json")
    parts = {
        "version": VERSION,
        "langs": [data.src_lang, data.tgt_lang],
        "source": reading,
        "content": content.hexdigest(),
        "tokenizer": {k: tokenizer[k] for k in TOKENIZER_KEYS},
    }
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return CacheKey(hashlib.sha256(canonical.encode()).hexdigest()[:20], parts, size, origin)


# The tokenizer settings that shape the vocabulary; the rest act in training.
TOKENIZER_KEYS = ("vocab_size", "min_frequency", "joint", "byte_fallback", "train_sample")


def source_files(source: SourceConfig, *, src_lang: str, tgt_lang: str) -> list[Path] | None:
    """The files a file-format source reads (in source, target order), or None for the others."""
    if source.format == "text":
        return list(text_files(source.path or "", src_lang=src_lang, tgt_lang=tgt_lang))
    if source.format in ("tsv", "jsonl"):
        return [Path(source.path or "")]
    return None


def _hash_file(digest, path: Path) -> int:
    with path.open("rb") as file:
        size = 0
        while block := file.read(_HASH_BLOCK):
            digest.update(block)
            size += len(block)
    digest.update(f"\0{size}\0".encode())  # where one file ends and the next begins
    return size


def _hash_pairs(digest, config: Config) -> int:
    data = config.data
    pairs, _ = stream_split(
        data.train, split="train", src_lang=data.src_lang, tgt_lang=data.tgt_lang, toy=data.toy
    )
    size = 0
    for src, tgt in pairs:
        record = json.dumps([src, tgt], ensure_ascii=False).encode() + b"\n"
        digest.update(record)
        size += len(record)
    return size

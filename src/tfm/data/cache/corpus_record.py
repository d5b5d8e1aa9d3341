"""The record the data cache keeps of a corpus under the corpus's own key (`corpus-<key>.json`):
its figures and the validation and test pairs held out of it, stored and read back.

The figures give a config without `tokenizer.vocab_size` its size (`tfm.data.vocabulary`)
before any entry is opened; the held-out pairs let a run on a prepared corpus read its
validation and test splits without reading the corpus (`tfm.data.held_out`).
"""

from __future__ import annotations

import json
from pathlib import Path

from tfm.atomic import atomic_write_text
from tfm.config import Config
from tfm.data.cache.cache_folder import cache_root
from tfm.data.cache.cache_key import ContentDigests, CorpusKey, corpus_key, source_files
from tfm.data.corpus_figures import TextFigures, figures_from
from tfm.data.held_out import HeldOut, held_out_splits, remember


def write_corpus_record(
    root: Path, corpus: str, figures: TextFigures, held_out: HeldOut | None
) -> None:
    """The corpus's `figures` and, where any, the pairs `held_out` of it, under its key."""
    record: dict = {"figures": figures.record()}
    if held_out is not None:
        record["held_out"] = held_out.pairs
    atomic_write_text(json.dumps(record) + "\n", _path(root, corpus))


def stored_figures(root: Path, corpus: str) -> TextFigures | None:
    """The figures recorded of `corpus`, or None where none are."""
    try:
        return figures_from(_read(root, corpus)["figures"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember_held_out(config: Config) -> None:
    """Where the cache holds the validation and test pairs held out of the config's training
    corpus, as its files are now, hand them to `held_out`, so that reading them reads no
    corpus; else nothing (reading them then reads the corpus)."""
    data = config.data
    langs = {"src_lang": data.src_lang, "tgt_lang": data.tgt_lang}
    if not held_out_splits(data) or source_files(data.corpus, **langs) is None:
        return  # nothing held out, or a corpus whose key is its pairs: reading them is no saving
    root = cache_root(config)
    found = corpus_key(config, ContentDigests(root))
    if found is not None:
        restore_held_out(config, root, found)


def restore_held_out(config: Config, root: Path, found: CorpusKey) -> None:
    """`remember_held_out` for the corpus `found` (its key known) in the cache at `root`."""
    if not held_out_splits(config.data) or found.first is None:
        return
    try:
        record = _read(root, found.corpus)["held_out"]
        pairs = {split: (list(src), list(tgt)) for split, (src, tgt) in record.items()}
    except (OSError, ValueError, KeyError, TypeError):  # prepared before they were kept
        return
    remember(config.data, HeldOut.of(config.data, pairs, found.first))


def _path(root: Path, corpus: str) -> Path:
    return root / f"corpus-{corpus}.json"


def _read(root: Path, corpus: str) -> dict:
    return json.loads(_path(root, corpus).read_text(encoding="utf-8"))

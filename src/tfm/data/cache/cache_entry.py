"""One prepared data-cache entry, mapped: its token ids, texts, load report and figures, and the
check that its files are still those written (`open_entry`)."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tfm.data.cache.cache_key import SIDES, VERSION
from tfm.data.cache.entry_files import changed_files
from tfm.data.corpus import LoadReport
from tfm.data.corpus_figures import SAMPLE, TextFigures, alignment, figures_from
from tfm.data.pipeline import EncodedSplit
from tfm.data.ragged import RaggedIds, RaggedText
from tfm.data.screening import SHOWN
from tfm.data.tokenizer import Tokenizer
from tfm.errors import DataError

log = logging.getLogger(__name__)

META = "meta.json"


@dataclass(frozen=True)
class CacheEntry:
    """A prepared training split: its folder, `meta.json`, and whether this process wrote it."""

    path: Path
    meta: dict
    written: bool = False

    @property
    def key(self) -> str:
        return self.meta["key"]

    def tokenizer(self) -> Tokenizer:
        return Tokenizer.load(self.path)

    def where(self) -> str:
        """Where the data is, and whether this process has just written it there."""
        return f"prepared data {'written to' if self.written else 'in'} {self.path}"

    def ids(self, side: str) -> RaggedIds:
        return RaggedIds.open(self.path / side, np.dtype(self.meta["dtypes"][side]))

    def texts(self, side: str) -> RaggedText:
        return RaggedText.open(self.path / side)

    def report(self) -> LoadReport:
        """The loading report as it was when the entry was prepared."""
        meta = self.meta
        report = LoadReport(split="train", origin=meta["origin"], read=meta["read"],
                            kept=meta["read"], unit=meta.get("unit", "line"))  # fmt: skip
        for reason, n in meta["dropped"].items():
            report.drop(reason, n)
        report.skipped = meta.get("skipped", [])
        report.first = dict(meta.get("first", {}))
        report.characters = meta.get("characters")
        report.corpora = [tuple(c) for c in meta.get("corpora", [])]
        report.notes = list(meta.get("notes", []))
        return report

    def split(self, *, max_length: int | None) -> EncodedSplit:
        """The training split, without pairs longer than `max_length` subword tokens on either
        side (framing excluded), counted in the report as `pipeline.encode_split` counts them."""
        src, tgt = self.ids("src"), self.ids("tgt")
        src_text, tgt_text = self.texts("src"), self.texts("tgt")
        report = self.report()
        if max_length is not None:
            keep = (src.lengths - 1 <= max_length) & (tgt.lengths - 2 <= max_length)
            if not keep.all():
                index = np.flatnonzero(keep)
                long = np.flatnonzero(~keep)[:SHOWN].tolist()
                report.drop("too long", len(src) - len(index), at=long)
                if not len(index):
                    raise DataError(f"train: no pairs left after filtering: {report.summary()}")
                src, tgt = src.subset(index), tgt.subset(index)
                src_text, tgt_text = src_text.subset(index), tgt_text.subset(index)
        return EncodedSplit("train", src_text, tgt_text, src, tgt, report)  # type: ignore[arg-type]

    def figures(self) -> TextFigures:
        """The raw training pairs, measured as they were read (`tfm.data.corpus_figures`); the
        alignment figures of an entry prepared before they were measured, from its first
        `SAMPLE` pairs now, as preparing measures them."""
        record = self.meta["figures"]
        if "off_ratio" not in record:
            sample = [self.texts(side).read(0, SAMPLE) for side in SIDES]
            record = {**record, **alignment(*sample)}
        return figures_from(record)

    def fingerprint(self, max_length: int | None) -> str:
        """The training data's identity for exact resume: the key and the length filter."""
        return hashlib.sha256(f"{self.key}:{max_length}".encode()).hexdigest()[:16]


def open_entry(path: Path) -> CacheEntry | None:
    """The entry in `path` if it is complete and its files are as they were written (their
    digests in meta.json), else None: it is then prepared again."""
    try:
        meta = json.loads((path / META).read_text(encoding="utf-8"))
        if meta.get("version") != VERSION:
            return None
        entry = CacheEntry(path, meta)
        for side in SIDES:
            for rows in (entry.ids(side), entry.texts(side)):
                if len(rows) != meta["pairs"]:
                    return None
        if changed := changed_files(path, meta["digests"]):
            log.warning("%s: %s changed since it was prepared; preparing it again", path, changed)
            return None
    except (OSError, ValueError, KeyError):  # missing, truncated or foreign files
        return None
    return entry

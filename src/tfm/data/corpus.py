"""Load one split of a parallel corpus from any `SourceConfig` format into a `datasets.Dataset`.

    texts, report = load_split(source, split="train", src_lang="de", tgt_lang="en", toy=toy)

`texts` has two string columns, "src" and "tgt", in file order; `src_lang`/`tgt_lang` choose which
side is the source, so de→en and en→de read the same files. Every format goes the same way: read
raw pairs (`formats.py` for files; here for hub, disk and toy), strip surrounding whitespace from
each sentence (inner whitespace is kept), drop pairs with an empty side as a pair (alignment kept;
counted as "empty"), and build the Dataset. Problems in the data raise `DataError` naming the file,
the line and what was expected; decisions (drops) are counted in the `LoadReport`.
Only `hub` touches the network.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import datasets

from tfm.config import SourceConfig, ToyConfig
from tfm.data.formats import Pairs, PairStream, field_names, jsonl_pairs, text_pairs, tsv_pairs
from tfm.errors import DataError

logger = logging.getLogger(__name__)

_LABELS = {"empty": "empty side"}  # how a drop reason reads in `summary()`
_FEATURES = datasets.Features({"src": datasets.Value("string"), "tgt": datasets.Value("string")})
_STRING_TYPES = ("string", "large_string")
_SHOWN_EMPTY = 5  # dropped pairs named in the log line


@dataclass
class LoadReport:
    """What loading one split did: `read` pairs from `origin`, `kept` of them, `dropped` by reason.

    Later stages (e.g. length filtering after tokenization) add their drops with `drop()`.
    """

    split: str
    origin: str
    read: int
    kept: int
    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str, n: int) -> None:
        """Record that `n` of the kept pairs were dropped for `reason`."""
        if not 0 <= n <= self.kept:
            raise ValueError(f"cannot drop n={n} pairs for {reason!r}: {self.kept} are kept")
        if n:
            self.kept -= n
            self.dropped[reason] = self.dropped.get(reason, 0) + n

    def summary(self) -> str:
        """One line, e.g. 'train: read 29,000 pairs from data/train.{de,en}, kept 28,998, …'."""
        line = f"{self.split}: read {self.read:,} pairs from {self.origin}, kept {self.kept:,}"
        total = sum(self.dropped.values())
        if not total:
            return f"{line}, dropped 0"
        reasons = ", ".join(f"{_LABELS.get(r, r)}: {n:,}" for r, n in self.dropped.items() if n)
        return f"{line}, dropped {total:,} ({reasons})"


def load_split(
    source: SourceConfig, *, split: str, src_lang: str, tgt_lang: str, toy: ToyConfig
) -> tuple[datasets.Dataset, LoadReport]:
    """Read the `split` pairs that `source` names, cleaned; see the module docstring."""
    stream, cleaner = stream_split(
        source, split=split, src_lang=src_lang, tgt_lang=tgt_lang, toy=toy
    )
    src, tgt = [], []
    for src_text, tgt_text in stream:
        src.append(src_text)
        tgt.append(tgt_text)
    report = cleaner.report()
    return datasets.Dataset.from_dict({"src": src, "tgt": tgt}, features=_FEATURES), report


def stream_split(
    source: SourceConfig, *, split: str, src_lang: str, tgt_lang: str, toy: ToyConfig
) -> tuple[Iterator[tuple[str, str]], Cleaner]:
    """`load_split` one cleaned pair at a time; `cleaner.report()` once they are all read.

    The file formats (`text`, `tsv`, `jsonl`) stream, so a corpus larger than memory goes
    through; `hub`, `disk` and `toy` are read whole first.
    """
    if src_lang == tgt_lang:
        raise DataError(f"src_lang and tgt_lang are both '{src_lang}'")
    key = f"data.{split}"
    langs = {"src_lang": src_lang, "tgt_lang": tgt_lang}
    path = source.path or ""  # the schema requires a path for the formats that read one
    if source.format == "text":
        stream = text_pairs(path, key=key, **langs)
    elif source.format == "tsv":
        stream = tsv_pairs(path, columns=source.columns, key=key, **langs)
    elif source.format == "jsonl":
        stream = jsonl_pairs(path, fields=source.fields, key=key, **langs)
    else:
        if source.format == "hub":
            pairs = _read_hub(source, split=split, key=key, **langs)
        elif source.format == "disk":
            pairs = _read_disk(source, split=split, key=key, **langs)
        else:
            pairs = _read_toy(toy, split=split, **langs)
        rows = zip(pairs.src, pairs.tgt, strict=True)
        stream = PairStream(rows, pairs.origin, pairs.unit)
    cleaner = Cleaner(split=split, origin=stream.origin, unit=stream.unit)
    return cleaner.clean(stream.pairs), cleaner


class Cleaner:
    """Strips each sentence and drops pairs with an empty side as a pair, counting them."""

    def __init__(self, *, split: str, origin: str, unit: str) -> None:
        self.split, self.origin, self.unit = split, origin, unit
        self.read = 0
        self.empty: list[int] = []  # the first few dropped pairs' indices, for the log
        self.n_empty = 0

    def clean(self, pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str]]:
        for src_text, tgt_text in pairs:
            self.read += 1
            src_text, tgt_text = src_text.strip(), tgt_text.strip()
            if src_text and tgt_text:
                yield src_text, tgt_text
            else:
                self.n_empty += 1
                if len(self.empty) < _SHOWN_EMPTY:
                    self.empty.append(self.read - 1)

    def report(self) -> LoadReport:
        """What was read and dropped (logged); DataError when no pair is left."""
        report = LoadReport(split=self.split, origin=self.origin, read=self.read, kept=self.read)
        report.drop("empty", self.n_empty)
        if self.n_empty:
            first = ", ".join(str(i + 1 if self.unit == "line" else i) for i in self.empty)
            more = ", …" if self.n_empty > len(self.empty) else ""
            logger.info(
                "%s: dropped %d pairs with an empty side (%ss %s%s)",
                self.origin, self.n_empty, self.unit, first, more,
            )  # fmt: skip
        if not report.kept:
            raise DataError(f"{self.origin}: no pairs left for {self.split}: {report.summary()}")
        return report


# --- hub and disk: one path from a Dataset(Dict) to pairs ------------------------------------


def _read_hub(source: SourceConfig, *, split: str, key: str, **langs: str) -> Pairs:
    name = source.split or split
    try:
        dataset = datasets.load_dataset(source.name, split=name)
    except datasets.exceptions.DatasetNotFoundError:
        raise DataError(f"hub dataset '{source.name}' not found; check {key}.name") from None
    except OSError as exc:  # ConnectionError, timeouts, offline mode
        raise DataError(
            f"could not reach the HuggingFace hub for '{source.name}' ({type(exc).__name__}); "
            f"use a local copy instead: {key}.format: disk with {key}.path: <folder from "
            f"save_to_disk>, or {key}.format: text with {key}.path: <prefix of the "
            f"{{path}}.{langs['src_lang']} and {{path}}.{langs['tgt_lang']} files>"
        ) from None
    except ValueError as exc:
        if "split" not in str(exc).lower():
            raise
        raise DataError(
            f"hub dataset '{source.name}' has no split '{name}'; set {key}.split"
        ) from None
    return _from_dataset(dataset, source, split=split, key=key, origin=str(source.name), **langs)


def _read_disk(source: SourceConfig, *, split: str, key: str, **langs: str) -> Pairs:
    path = source.path or ""  # the schema requires it for format disk
    if not Path(path).is_dir():
        raise DataError(f"{source.path}: no such folder (check {key}.path)")
    try:
        dataset = datasets.load_from_disk(path)
    except FileNotFoundError:
        raise DataError(
            f"{source.path}: not a folder written by datasets' save_to_disk (check {key}.path)"
        ) from None
    return _from_dataset(dataset, source, split=split, key=key, origin=path, **langs)


def _from_dataset(
    dataset: datasets.Dataset | datasets.DatasetDict,
    source: SourceConfig,
    *,
    split: str,
    key: str,
    origin: str,
    src_lang: str,
    tgt_lang: str,
) -> Pairs:
    """Pick the split (of a DatasetDict) and the two columns named by `source.fields`."""
    if isinstance(dataset, datasets.DatasetDict):
        name = source.split or split
        if name not in dataset:
            available = ", ".join(dataset)
            raise DataError(f"{origin}: no split '{name}' (splits: {available}); set {key}.split")
        dataset, origin = dataset[name], f"{origin} [{name}]"
    elif source.format == "disk" and source.split:
        raise DataError(f"{origin} holds one Dataset without splits; remove {key}.split")
    names = field_names(source.fields, src_lang=src_lang, tgt_lang=tgt_lang, key=key)
    if any(name not in dataset.column_names for name in names):
        dataset = dataset.flatten()  # nested columns become "translation.de" etc.
    for lang, name in zip((src_lang, tgt_lang), names, strict=True):
        if name not in dataset.column_names:
            columns = ", ".join(dataset.column_names)
            raise DataError(
                f"{origin}: no column '{name}' for '{lang}' (columns: {columns}); set {key}.fields"
            )
        feature = dataset.features[name]
        if getattr(feature, "dtype", None) not in _STRING_TYPES:
            raise DataError(f"{origin}: column '{name}' holds {feature}, expected strings")
    columns = dataset.select_columns(names).to_dict()
    src, tgt = ([text or "" for text in columns[name]] for name in names)  # null: empty side
    return Pairs(src, tgt, origin, "row")


# --- toy -------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _toy_corpus(n_train: int, n_validation: int, n_test: int, seed: int) -> dict:
    """All three toy splits come from one `generate` call, made once per sizes and seed."""
    from tfm.data import toy  # here, not at the top: only the toy format needs it

    return toy.generate(n_train=n_train, n_validation=n_validation, n_test=n_test, seed=seed)


def _read_toy(toy: ToyConfig, *, split: str, src_lang: str, tgt_lang: str) -> Pairs:
    if {src_lang, tgt_lang} != {"en", "de"}:
        raise DataError(
            f"the toy corpus is English–German, but src_lang/tgt_lang are "
            f"'{src_lang}'/'{tgt_lang}'; use en and de, or another data format"
        )
    try:
        corpus = _toy_corpus(toy.n_train, toy.n_validation, toy.n_test, toy.seed)
    except ValueError as exc:  # sizes the grammar cannot reach
        raise DataError(f"data.toy: {exc}") from None
    if split not in corpus:
        raise DataError(f"the toy corpus has splits {', '.join(corpus)}, not '{split}'")
    english, german = zip(*corpus[split], strict=True) if corpus[split] else ((), ())
    src, tgt = (english, german) if src_lang == "en" else (german, english)
    origin = f"the toy corpus (seed {toy.seed})"
    return Pairs(list(src), list(tgt), origin, "row")

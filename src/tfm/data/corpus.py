"""Load one split of a parallel corpus from any `SourceConfig` format into two lists of strings.

    texts, report = load_split(source, split="train", src_lang="de", tgt_lang="en", toy=toy)

`texts` has two lists of strings, "src" and "tgt", in file order; `src_lang`/`tgt_lang` choose which
side is the source, so de→en and en→de read the same files. Every format goes the same way: read
raw pairs (`formats.py` for files, `library_corpora.py` for hub, disk and toy), strip surrounding
whitespace from each sentence (inner whitespace is kept), drop pairs with an empty side as a pair
(alignment kept; counted as "empty"). Problems in the data raise `DataError` naming the file,
the line and what was expected; decisions (drops) are counted in the `LoadReport`.
Control and replacement characters are warned about or refused (`screening`), and the report
names the first lines of each kind of dropped pair.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tfm.config import DataConfig, SourceConfig, ToyConfig
from tfm.data.formats import (
    Hashing,
    PairStream,
    check_files_exist,
    chunked,
    files_read,
    jsonl_pairs,
    text_pairs,
    tsv_pairs,
)
from tfm.data.library_corpora import (
    check_disk_folder,
    check_toy_split,
    read_disk,
    read_hub,
    read_toy,
    toy_has_languages,
)
from tfm.data.screening import CharacterScreen, first_lines, read_indices, report_characters
from tfm.errors import DataError
from tfm.limits import MAX_LINE_CHARS

logger = logging.getLogger(__name__)

LONG_LINE = "side too long"  # a pair dropped before tokenizing: more than MAX_LINE_CHARS characters
_LABELS = {"empty": "empty side", LONG_LINE: f"side over {MAX_LINE_CHARS:,} characters"}


class Withhold(Protocol):
    """Pairs a reader leaves out besides the empty and the too long (`Cleaner`), counted in its
    report under `label`: those `withholds` picks as they are read, and those `end_of_read`
    picks once the read is over, among the pairs let through (a choice that needs the whole
    corpus: `held_out.HoldingOut`; the reader's caller then drops them from what it kept)."""

    @property
    def label(self) -> str: ...

    def withholds(self, pair: tuple[str, str]) -> bool: ...

    def end_of_read(self, origin: str) -> list[int]:
        """The pairs this read (of `origin`, as its reader names it) let through that are left
        out after all, by their sorted indices among those it let through."""
        ...


@dataclass
class LoadReport:
    """What loading one split did: `read` pairs from `origin`, `kept` of them, `dropped` by reason.

    Later stages (e.g. length filtering after tokenization) add their drops with `drop()`. With
    the indices of the dropped pairs (`at`), the summary names the first lines (or rows) of each
    reason; `skipped` holds the read indices of the pairs dropped when loading (empty sides).
    `characters` is what `screening` found in the text (None: nothing); `corpora`, in a report
    of several training corpora, each one's pairs kept (read once) and its repeat.
    """

    split: str
    origin: str
    read: int
    kept: int
    dropped: dict[str, int] = field(default_factory=dict)
    unit: str = "line"  # what `first` counts: "line" (from 1) or "row" (from 0)
    skipped: list[int] = field(default_factory=list)
    first: dict[str, list[int]] = field(default_factory=dict)  # reason -> first lines or rows
    characters: dict | None = None
    corpora: list[tuple[int, int]] = field(default_factory=list)  # merged: (kept, times) each
    notes: list[str] = field(default_factory=list)  # merged: why a corpus is read as it is

    def drop(self, reason: str, n: int, *, at: Sequence[int] = ()) -> None:
        """Record that `n` of the kept pairs, at indices `at` among them, were dropped."""
        if not 0 <= n <= self.kept:
            raise ValueError(f"cannot drop n={n} pairs for {reason!r}: {self.kept} are kept")
        if n:
            self.kept -= n
            self.dropped[reason] = self.dropped.get(reason, 0) + n
        if len(at) and reason not in self.first:
            self.first[reason] = first_lines(at, self.skipped, self.unit)

    def summary(self) -> str:
        """One line, e.g. 'train: read 29,000 pairs from data/train.{de,en}, kept 28,998, …'."""
        line = f"{self.split}: read {self.read:,} pairs from {self.origin}, kept {self.kept:,}"
        total = sum(self.dropped.values())
        if not total:
            return f"{line}, dropped 0"
        reasons = ", ".join(
            f"{_LABELS.get(r, r)}: {n:,}{self._where(r, n)}" for r, n in self.dropped.items() if n
        )
        return f"{line}, dropped {total:,} ({reasons})"

    def _where(self, reason: str, n: int) -> str:
        shown = self.first.get(reason, [])
        if not shown:
            return ""
        more = ", …" if n > len(shown) else ""
        unit = self.unit if len(shown) == 1 else f"{self.unit}s"
        return f" at {unit} {', '.join(map(str, shown))}{more}"


def check_splits_readable(data: DataConfig, splits: Sequence[str]) -> None:
    """Before any split is read: every file (or `disk` folder) the `splits` of `data` read is
    there, and a split left to the built-in toy corpus is asked for in the toy's languages
    (DataError for the first problem). A mistyped validation path, or a config that names no
    validation split for another language pair, is named at the start, not after the training
    split has been prepared. The training split reads `data.related` too, and validation the
    related pairs' own validation splits."""
    for split in splits:
        if split == "train":
            corpora = [(c.key, c.source, c.src_lang, c.tgt_lang) for c in data.training_corpora()]
        else:
            corpora = [(f"data.{split}", getattr(data, split), data.src_lang, data.tgt_lang)]
        if split == "validation":  # the related pairs' own, scored beside the main pair's
            corpora += [(f"data.related[{i}].validation", r.validation, r.src_lang, r.tgt_lang)
                        for i, r in enumerate(data.related) if r.validation]  # fmt: skip
        for key, source, src_lang, tgt_lang in corpora:
            if source.format == "held_out":
                continue  # read from data.train, which is checked too
            if source.format == "toy" and (src_lang, tgt_lang) != (data.src_lang, data.tgt_lang):
                if not toy_has_languages(src_lang, tgt_lang):  # a related corpus
                    raise DataError(f"{key}: the toy corpus is English–German, not {src_lang}→"
                                    f"{tgt_lang}")  # fmt: skip
            elif source.format == "toy":
                check_toy_split(data, split)
            if source.format == "disk":
                check_disk_folder(source, key=key)
            files = files_read(source.format, source.path or "", key=key,
                               src_lang=src_lang, tgt_lang=tgt_lang)  # fmt: skip
            check_files_exist(files)


def load_split(
    source: SourceConfig,
    *,
    split: str,
    src_lang: str,
    tgt_lang: str,
    toy: ToyConfig,
    control_chars: str | None = "warn",
    withhold: Withhold | None = None,
) -> tuple[dict[str, list[str]], LoadReport]:
    """Read the `split` pairs that `source` names, cleaned; see the module docstring."""
    stream, cleaner = stream_split(
        source, split=split, src_lang=src_lang, tgt_lang=tgt_lang, toy=toy,
        control_chars=control_chars, withhold=withhold,
    )  # fmt: skip
    src: list[str] = []
    tgt: list[str] = []
    for chunk in stream:
        src.extend(src_text for src_text, _ in chunk)
        tgt.extend(tgt_text for _, tgt_text in chunk)
    return {"src": src, "tgt": tgt}, cleaner.report()


def stream_split(
    source: SourceConfig,
    *,
    split: str,
    src_lang: str,
    tgt_lang: str,
    toy: ToyConfig,
    control_chars: str | None = None,
    hashing: Hashing | None = None,
    withhold: Withhold | None = None,
) -> tuple[Iterator[list[tuple[str, str]]], Cleaner]:
    """`load_split` a list of cleaned pairs at a time (`formats.chunked`; none empty);
    `cleaner.report()` once they are all read.

    The file formats (`text`, `tsv`, `jsonl`) stream, so a corpus larger than memory goes
    through; `hub`, `disk` and `toy` are read whole first. With `control_chars` ("warn" or
    "refuse", as `data.control_chars`), the raw text is screened (`screening`); None: not.
    The files' bytes are told to `hashing` as they are read. With `withhold`, the pairs it
    picks are left out too, counted under its label (`Withhold`).
    """
    if src_lang == tgt_lang:
        raise DataError(f"src_lang and tgt_lang are both '{src_lang}'")
    if source.format == "held_out":
        raise ValueError("a held-out split is read from the training corpus (`held_out`)")
    key = f"data.{split}"
    langs = {"src_lang": src_lang, "tgt_lang": tgt_lang}
    path = source.path or ""  # the schema requires a path for the formats that read one
    if source.format == "text":
        stream = text_pairs(path, key=key, hashing=hashing, **langs)
    elif source.format == "tsv":
        stream = tsv_pairs(path, columns=source.columns, key=key, hashing=hashing, **langs)
    elif source.format == "jsonl":
        stream = jsonl_pairs(path, fields=source.fields, key=key, hashing=hashing, **langs)
    else:
        if source.format == "hub":
            pairs = read_hub(source, split=split, key=key, **langs)
        elif source.format == "disk":
            pairs = read_disk(source, split=split, key=key, **langs)
        else:
            pairs = read_toy(toy, split=split, **langs)
        rows = zip(pairs.src, pairs.tgt, strict=True)
        stream = PairStream(rows, pairs.origin, pairs.unit)
    raw: Iterable[list[tuple[str, str]]] = chunked(stream.pairs)
    screen = None
    if control_chars is not None:
        screen = CharacterScreen(
            source=source, split=split, origin=stream.origin, unit=stream.unit,
            langs=(src_lang, tgt_lang), policy=control_chars,
        )  # fmt: skip
        raw = screen.watch(raw)
    cleaner = Cleaner(
        split=split, origin=stream.origin, unit=stream.unit, screen=screen, withhold=withhold
    )
    return cleaner.clean(raw), cleaner


class Cleaner:
    """Strips each sentence and drops pairs with an empty side as a pair, counting them; in the
    training split, also pairs with a side longer than MAX_LINE_CHARS characters (reported at
    once: BPE's time grows with the square of a word's length, and no sentence is that long)."""

    def __init__(
        self,
        *,
        split: str,
        origin: str,
        unit: str,
        screen: CharacterScreen | None = None,
        withhold: Withhold | None = None,
    ) -> None:
        self.split, self.origin, self.unit, self.screen = split, origin, unit, screen
        self.withhold = withhold
        self.read = 0
        self.empty: list[int] = []  # the read indices of the dropped pairs
        self.long: list[int] = []
        self.held: list[int] = []
        self.max_chars = MAX_LINE_CHARS if split == "train" else None

    def clean(self, chunks: Iterable[list[tuple[str, str]]]) -> Iterator[list[tuple[str, str]]]:
        """Each chunk's pairs stripped, less the empty and the too long (counted); no chunk
        comes out empty."""
        limit = self.max_chars
        withheld = self.withhold.withholds if self.withhold is not None else None
        for chunk in chunks:
            kept = []
            for src_text, tgt_text in chunk:
                self.read += 1
                src_text, tgt_text = src_text.strip(), tgt_text.strip()
                if not (src_text and tgt_text):
                    self.empty.append(self.read - 1)
                elif limit is not None and max(len(src_text), len(tgt_text)) > limit:
                    self.long.append(self.read - 1)
                elif withheld is not None and withheld((src_text, tgt_text)):
                    self.held.append(self.read - 1)
                else:
                    kept.append((src_text, tgt_text))
            if kept:
                yield kept
        if self.withhold is not None and (later := self.withhold.end_of_read(self.origin)):
            skipped = sorted(self.empty + self.long + self.held)
            self.held = sorted(self.held + read_indices(later, skipped))

    @property
    def kept(self) -> int:
        """The pairs kept so far."""
        return self.read - len(self.empty) - len(self.long) - len(self.held)

    def report(self) -> LoadReport:
        """What was read and dropped (for the caller to log, once every drop is in), and the
        characters the screen found (warned about now); DataError when no pair is left."""
        read = self.read
        report = LoadReport(
            split=self.split, origin=self.origin, read=read, kept=read, unit=self.unit
        )
        report.drop("empty", len(self.empty), at=self.empty)
        report.drop(LONG_LINE, len(self.long), at=self.long)
        if self.withhold is not None:
            report.drop(self.withhold.label, len(self.held), at=self.held)
        report.skipped = sorted(self.empty + self.long + self.held)
        if self.long:
            logger.warning("%s: dropped %d pair(s) with a side longer than %s characters (%s %s)",
                           self.split, len(self.long), f"{MAX_LINE_CHARS:,}", self.unit,
                           ", ".join(map(str, report.first[LONG_LINE])))  # fmt: skip
        if self.screen is not None:
            report.characters = self.screen.found()
            report_characters(report.characters, split=self.split, policy=self.screen.policy)
        if not report.kept:
            raise DataError(f"{self.origin}: no pairs left for {self.split}: {report.summary()}")
        return report

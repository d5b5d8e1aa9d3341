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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tfm.config import DataConfig, SourceConfig, ToyConfig
from tfm.config.schema import TrainingCorpus
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
from tfm.data.tokenizer import tag_token
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
    split has been prepared. The training split reads `data.related` too."""
    for split in splits:
        if split == "train":
            corpora = [(c.key, c.source, c.src_lang, c.tgt_lang) for c in data.training_corpora()]
        else:
            corpora = [(f"data.{split}", getattr(data, split), data.src_lang, data.tgt_lang)]
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


def stream_training(
    data: DataConfig,
    *,
    control_chars: str | None = None,
    hashing: Hashing | None = None,
    withhold: Withhold | None = None,
) -> tuple[Iterator[list[tuple[str, str]]], Callable[[], LoadReport]]:
    """The training split's cleaned pairs a list at a time (`stream_split`), corpus after corpus
    of `data.train`: each read `repeat` times, its sources after its tags (`<2pt> <bt> …`). The
    second is the one load report of them all, once every pair is read. Each file's bytes are
    told to `hashing` once, and each corpus is screened (`control_chars`) once. The corpora of
    `data.related` are read beside them by `related.training_stream`."""
    corpora = data.training_corpora()[: len(data.corpora)]
    if len(corpora) == 1 and corpora[0].source.repeat == 1 and not corpora[0].tags:
        stream, cleaner = stream_split(
            corpora[0].source, split="train", toy=data.toy, hashing=hashing,
            control_chars=control_chars, withhold=withhold, src_lang=data.src_lang,
            tgt_lang=data.tgt_lang,
        )  # fmt: skip
        return stream, cleaner.report
    reads = [CorpusRead(corpus, corpus.source.repeat, withhold) for corpus in corpora]
    return stream_reads(reads, toy=data.toy, control_chars=control_chars, hashing=hashing)


@dataclass
class CorpusRead:
    """One training corpus as a stream reads it: `times` over (0: left out; its pairs are
    still read through, so that its files are hashed and screened, but none is kept),
    leaving out what `withhold` picks. `note`: why it is read as it is, for the report."""

    corpus: TrainingCorpus
    times: int
    withhold: Withhold | None = None
    note: str = ""


def stream_reads(
    reads: Sequence[CorpusRead],
    *,
    toy: ToyConfig,
    control_chars: str | None = None,
    hashing: Hashing | None = None,
    then: Callable[[list[int]], Sequence[CorpusRead]] | None = None,
) -> tuple[Iterator[list[tuple[str, str]]], Callable[[], LoadReport]]:
    """The cleaned pairs of `reads`, one after another, each corpus's sources after its tags,
    and their one load report. Each file's bytes are told to `hashing` once, and each corpus is
    screened once. `then`, given the pairs each of the first reads kept, names more reads of
    the same corpora (none is hashed or screened again) that follow them."""
    cleaners: list[Cleaner] = []
    done: list[CorpusRead] = []

    def read(
        one: CorpusRead, *, times: int, told: Hashing | None, first: bool
    ) -> Iterator[list[tuple[str, str]]]:
        corpus = one.corpus
        prefix = "".join(f"{tag_token(tag)} " for tag in corpus.tags)
        for n in range(times):
            stream, cleaner = stream_split(
                corpus.source, split="train", toy=toy, withhold=one.withhold,
                hashing=told if n == 0 else None,
                control_chars=control_chars if first and n == 0 else None,
                src_lang=corpus.src_lang, tgt_lang=corpus.tgt_lang,
            )  # fmt: skip
            for chunk in stream:
                if one.times:  # a corpus left out is read through, and nothing kept
                    yield [(prefix + src, tgt) for src, tgt in chunk] if prefix else chunk
            if first and n == 0:
                cleaners.append(cleaner)

    def chunks() -> Iterator[list[tuple[str, str]]]:
        hashed: set[str] = set()
        for one in reads:
            corpus = one.corpus
            files = files_read(corpus.source.format, corpus.source.path or "", key="",
                               src_lang=corpus.src_lang, tgt_lang=corpus.tgt_lang)  # fmt: skip
            told = hashing if not hashed.intersection(str(f) for f, _ in files) else None
            hashed.update(str(f) for f, _ in files)
            yield from read(one, times=max(one.times, 1), told=told, first=True)
            done.append(one)
        for more in then([cleaner.kept for cleaner in cleaners]) if then else ():
            yield from read(more, times=more.times, told=None, first=False)
            for one in done:
                if one.corpus.key == more.corpus.key:
                    one.times += more.times

    def report() -> LoadReport:
        return merged_report([cleaner.report() for cleaner in cleaners], done)

    return chunks(), report


def merged_report(reports: Sequence[LoadReport], reads: Sequence[CorpusRead]) -> LoadReport:
    """One load report for the training corpora read one after another, each as often as it
    was; where more than one was read, lines are not named (they are each file's). Its
    `corpora` are the pairs each kept, once, and how often it was read; its `notes` why."""
    origins = []
    for report, one in zip(reports, reads, strict=True):
        tags = "".join(f" <{tag}>" for tag in one.corpus.tags)
        times = " (left out)" if not one.times else f" ×{one.times}" if one.times > 1 else ""
        origins.append(report.origin + times + tags)
    merged = LoadReport(split="train", origin=" + ".join(origins), read=0, kept=0,
                        unit=reports[0].unit)  # fmt: skip
    for report, one in zip(reports, reads, strict=True):
        merged.read += report.read * one.times
        merged.kept += report.read * one.times
        for reason, n in report.dropped.items():
            merged.drop(reason, n * one.times)
        merged.corpora.append((report.kept, one.times))
        if one.note:
            merged.notes.append(f"{one.corpus.key}: {one.note}")
    if len(reports) == 1:
        merged.first, merged.skipped = dict(reports[0].first), list(reports[0].skipped)
    characters = [report.characters for report in reports if report.characters]
    merged.characters = characters[0] if characters else None
    return merged


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

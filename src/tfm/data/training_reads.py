"""The training split as one stream of cleaned pairs, read corpus after corpus.

    stream, report_of = stream_training(data, control_chars="count", withhold=held)

`data.train` may list several corpora, each read `repeat` times, its sources after its tags
(`<bt> …`; `<2pt> …` where the model translates into several languages). `stream_reads` reads
any such list (`CorpusRead`: a corpus, how many times, what it leaves out), hashing and
screening each file once, and makes one load report of them all (`merged_report`); the related
pairs' mix (`related.py`) adds reads of the main pair after the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from tfm.config import DataConfig, ToyConfig
from tfm.config.schema import TrainingCorpus
from tfm.data.corpus import Cleaner, LoadReport, Withhold, stream_split
from tfm.data.formats import Hashing, files_read
from tfm.data.tokenizer import tag_token


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

"""Related pairs trained beside the main one (`data.related`): one training stream, mixed.

    stream, report_of = training_stream(data, control_chars="count", withhold=held)

Without `data.related` this is `training_reads.stream_training`. With it, the stream reads:

1. the main pair's corpora (`data.train`) as `stream_training` does, finding the held-out
   splits on the way (`withhold`);
2. each related corpus once, in its own languages, each source after the tag of its target
   language where the model translates into several (`<2pt>`; Johnson et al., 2017), less every
   pair with a sentence of the main pair's validation or test in the same language (`Guard`:
   Tatoeba's English sentences, for one, recur in many pairs, and no reference may be trained
   on through another pair);
3. the main pair's corpora again, as many times as it takes them to make `data.main_share` of
   the pairs (MAIN_SHARE where the config leaves it): larger neighbours never drown the pair
   that validation, early stopping and the plan's time are for.

A related corpus whose other language is written in another script than the main pair's
language on that side (en→ja beside en→fr: `script_of` a sample of each) shares no subwords
with it: it would take the main pair's updates and give it little, so it is left out, and the
report says why; a `repeat` given for it in the config keeps it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from tfm.config import DataConfig
from tfm.config.schema import RelatedConfig, TrainingCorpus
from tfm.data.corpus import LoadReport, Withhold, load_split, stream_split
from tfm.data.corpus_figures import letter_script
from tfm.data.formats import Hashing
from tfm.data.held_out import held_out, sentence_hash
from tfm.data.training_reads import CorpusRead, stream_reads, stream_training

MAIN_SHARE = 0.5  # the main pair's share of an epoch's pairs, where data.main_share is not given
SAMPLE = 2_000  # pairs of a corpus whose letters tell its scripts
GUARD_LABEL = "sharing a sentence with the main pair's validation or test"

Pair = tuple[str, str]


def training_stream(
    data: DataConfig,
    *,
    control_chars: str | None = None,
    hashing: Hashing | None = None,
    withhold: Withhold | None = None,
) -> tuple[Iterator[list[Pair]], Callable[[], LoadReport]]:
    """The training split's cleaned pairs a list at a time, and its one load report once every
    pair is read (module docstring)."""
    if not data.related:
        return stream_training(data, control_chars=control_chars, hashing=hashing,
                               withhold=withhold)  # fmt: skip
    corpora = data.training_corpora()
    main, related = corpora[: len(data.corpora)], corpora[len(data.corpora) :]
    guard = Guard(data)
    main_scripts = _side_scripts(main[0], data)
    reads = [CorpusRead(c, c.source.repeat, withhold) for c in main]
    for corpus, config in zip(related, data.related, strict=True):
        note = _other_script(corpus, config, data, main_scripts)
        reads.append(CorpusRead(corpus, 0 if note else config.repeat, guard.of(corpus), note))
    share = data.main_share or MAIN_SHARE

    def again(kept: list[int]) -> list[CorpusRead]:
        ours = sum(k * c.source.repeat for k, c in zip(kept, main, strict=False))
        theirs = sum(k * one.times for k, one in zip(kept, reads, strict=True)) - ours
        times = main_times(ours, theirs, share)
        return [CorpusRead(c, (times - 1) * c.source.repeat, withhold) for c in main if times > 1]

    return stream_reads(reads, toy=data.toy, control_chars=control_chars, hashing=hashing,
                        then=again)  # fmt: skip


def main_times(main_pairs: int, related_pairs: int, share: float) -> int:
    """How many times the main pair's corpora are read so that their `main_pairs` make at least
    `share` of an epoch beside `related_pairs`: never fewer than once."""
    if not main_pairs or not related_pairs:
        return 1
    return max(1, math.ceil(share * related_pairs / ((1.0 - share) * main_pairs) - 1e-9))


class Guard:
    """The main pair's validation and test sentences by language (their hashes), which no
    related corpus trains on; found when a related corpus is first read, after the main
    pair's corpus (whose read finds the held-out splits)."""

    def __init__(self, data: DataConfig) -> None:
        self.data = data
        self._hashes: dict[str, frozenset[int]] | None = None

    def of(self, corpus: TrainingCorpus) -> Withhold:
        """What a reader of `corpus` (a related one) leaves out."""
        return _Guarded(self, corpus.src_lang, corpus.tgt_lang)

    def hashes(self, lang: str) -> frozenset[int]:
        if self._hashes is None:
            self._hashes = self._find()
        return self._hashes.get(lang, frozenset())

    def _find(self) -> dict[str, frozenset[int]]:
        data = self.data
        found: dict[str, set[int]] = {data.src_lang: set(), data.tgt_lang: set()}
        for split in ("validation", "test"):
            source = getattr(data, split)
            if source.format == "toy":
                continue  # generated: another pair's corpus cannot hold its sentences
            if source.format == "held_out":
                held = held_out(data)
                assert held is not None  # a split of this format is held out
                src, tgt = held.pairs[split]
            else:
                texts, _ = load_split(
                    source, split=split, src_lang=data.src_lang, tgt_lang=data.tgt_lang,
                    toy=data.toy, control_chars=None,
                )  # fmt: skip
                src, tgt = texts["src"], texts["tgt"]
            found[data.src_lang].update(map(sentence_hash, src))
            found[data.tgt_lang].update(map(sentence_hash, tgt))
        return {lang: frozenset(hashes) for lang, hashes in found.items()}


class _Guarded:
    """`Guard`'s `Withhold` for a related corpus of `src_lang`→`tgt_lang`."""

    label = GUARD_LABEL

    def __init__(self, guard: Guard, src_lang: str, tgt_lang: str) -> None:
        self.guard, self.langs = guard, (src_lang, tgt_lang)
        self._sides: tuple[frozenset[int], frozenset[int]] | None = None

    def withholds(self, pair: Pair) -> bool:
        if self._sides is None:  # the guard's hashes, once its first pair is read
            self._sides = (self.guard.hashes(self.langs[0]), self.guard.hashes(self.langs[1]))
        src, tgt = self._sides
        return sentence_hash(pair[0]) in src or sentence_hash(pair[1]) in tgt

    def end_of_read(self, origin: str) -> list[int]:
        return []


def script_of(texts: Iterable[str]) -> str:
    """The script most letters of `texts` are written in, as Unicode names it (LATIN,
    CYRILLIC, CJK …); NONE where there is no letter."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(letter_script(char) for char in text if char.isalpha())
    return counts.most_common(1)[0][0] if counts else "NONE"


def _side_scripts(corpus: TrainingCorpus, data: DataConfig) -> tuple[str, str]:
    """The scripts of a sample of `corpus`'s source and target sides."""
    stream, _ = stream_split(corpus.source, split="train", src_lang=corpus.src_lang,
                             tgt_lang=corpus.tgt_lang, toy=data.toy)  # fmt: skip
    sample: list[Pair] = []
    for chunk in stream:
        sample += chunk[: SAMPLE - len(sample)]
        if len(sample) >= SAMPLE:
            break
    return script_of(s for s, _ in sample), script_of(t for _, t in sample)


def _other_script(
    corpus: TrainingCorpus, config: RelatedConfig, data: DataConfig, main: tuple[str, str]
) -> str:
    """Why `corpus` is left out (another script than the main pair's on a side where its
    language differs), or "" where it is read; a `repeat` the config gives keeps it."""
    if "repeat" in config.model_fields_set:
        return ""
    langs = (corpus.src_lang, corpus.tgt_lang)
    ours = (data.src_lang, data.tgt_lang)
    scripts = _side_scripts(corpus, data)
    for side in (0, 1):
        if langs[side] != ours[side] and scripts[side] != main[side]:
            return (
                f"left out: its {langs[side]} is written in {scripts[side].lower()} script, "
                f"{ours[side]} in {main[side].lower()}, so they share no subwords and it would "
                "take the main pair's updates (give its `repeat` to train on it)"
            )
    return ""


def main_batch_share(data: DataConfig, report: LoadReport) -> float:
    """The main pair's own epoch (its corpora each read `repeat` times, not the mix's extra
    reads) as a share of the mixed epoch's pairs: the batch is sized from that share of the
    epoch's tokens, the batch the main pair alone would get (1 without related pairs). On
    en→fr beside it and pt, 30 minutes on one thread, the 2,048-token batches of the mixed
    epoch trained a quarter of the steps (docs/experiments.md)."""
    mix = mix_record(data, report)
    if mix is None:
        return 1.0
    total = sum(c["pairs"] * c["times"] for c in mix["corpora"])
    own = sum(c["pairs"] * source.repeat for c, source in zip(mix["corpora"], data.corpora,
                                                              strict=False))  # fmt: skip
    return own / total if total else 1.0


def describe_mix(data: DataConfig, report: LoadReport) -> list[str]:
    """The mix a training report of `data` read, as the plan shows it: each corpus's pairs and
    how often an epoch reads them, then why a corpus is read as it is."""
    mix = mix_record(data, report)
    if mix is None:
        return []
    corpora = mix["corpora"]
    total = sum(c["pairs"] * c["times"] for c in corpora) or 1
    main = sum(c["pairs"] * c["times"] for c in corpora[: len(data.corpora)])
    parts = []
    for c in corpora:
        read = f" ×{c['times']}" if c["times"] > 1 else " (left out)" if not c["times"] else ""
        parts.append(f"{c['src_lang']}→{c['tgt_lang']} {c['pairs']:,}{read}")
    rule = "data.main_share" if data.main_share else "the rule"
    return [
        f"mix: {', '.join(parts)}; the main pair is {main / total:.0%} of an epoch's "
        f"{total:,} pairs (at least {mix['main_share']:.0%}, {rule})",
        *(f"mix: {note}" for note in mix["notes"]),
    ]


def mix_record(data: DataConfig, report: LoadReport) -> dict | None:
    """The mix for a run's plan.json: each corpus's key, languages, pairs kept and how often an
    epoch reads them, the main pair's share asked for, and why a corpus is read as it is."""
    if not data.related or len(report.corpora) != len(data.training_corpora()):
        return None
    corpora = [
        {"key": corpus.key, "src_lang": corpus.src_lang, "tgt_lang": corpus.tgt_lang,
         "pairs": kept, "times": times}
        for corpus, (kept, times) in zip(data.training_corpora(), report.corpora, strict=True)
    ]  # fmt: skip
    return {"corpora": corpora, "main_share": data.main_share or MAIN_SHARE, "notes": report.notes}

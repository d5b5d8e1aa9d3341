"""Validation and test pairs held out of the training corpus, for a corpus that comes whole.

A config that names `data.train` (not the toy corpus) and no `data.validation` gets one held
out of the training corpus (`format: held_out`, which a config may also give), and a test split
too where it names none. Which pairs is decided by their sentences, not their places in the file:

- Each pair's sentence in the language whose code sorts first (`de` of de–en and of en–de) is
  hashed; the held-out sentences are those with the smallest hashes, even ones for validation
  and odd ones for test. So the choice does not depend on the file's order, a direction and its
  reverse hold out the same pairs, and each split stays the same whether the other is held out
  or given.
- A held-out sentence takes all its pairs with it (each distinct pair once), and training reads
  none of them, repeats included: the held-out scores are on sentences training never saw.
- A split holds `pairs` sentences, or by default 5% of the training pairs (at least one, at most
  1,000, as many as a validation needs and few enough to decode in seconds).

Finding them is one pass over the cleaned training pairs, made once a process (`held_out`).
"""

from __future__ import annotations

import hashlib
import heapq
import os
from dataclasses import dataclass

from tqdm import tqdm

from tfm.config import DataConfig
from tfm.data.corpus import LoadReport, Withhold, stream_split
from tfm.data.formats import files_read
from tfm.errors import DataError

PARITY = {"validation": 0, "test": 1}  # of the hash: the split a sentence can be held out for
DEFAULT_SHARE = 0.05
DEFAULT_MAX = 1_000
MAX_SHARE = 0.5  # the held-out splits together may take at most this share of the pairs

Pair = tuple[str, str]


def held_out_splits(data: DataConfig) -> tuple[str, ...]:
    """The splits of `data` that are held out of its training corpus."""
    return tuple(split for split in PARITY if getattr(data, split).format == "held_out")


def sentence_hash(text: str) -> int:
    """A 64-bit hash of a sentence, the same in every process (unlike `hash`)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def default_pairs(n_pairs: int) -> int:
    """The sentences a held-out split takes from a corpus of `n_pairs` pairs, by default."""
    return max(1, min(DEFAULT_MAX, round(DEFAULT_SHARE * n_pairs)))


@dataclass(frozen=True)
class HeldOut:
    """The held-out splits of one training corpus: their pairs in file order (`pairs`), the
    hashes of their sentences (`hashes`), which side was hashed (`side`: 0 source, 1 target),
    and the training source as its reader names it (`origin`)."""

    origin: str
    pairs: dict[str, tuple[list[str], list[str]]]
    hashes: frozenset[int]
    side: int

    def label(self) -> str:
        """The training report's reason for the pairs this leaves out."""
        return f"held out for {' and '.join(self.pairs)}"

    def withholds(self, pair: Pair) -> bool:
        """Whether training leaves `pair` out: its sentence is held out."""
        return sentence_hash(pair[self.side]) in self.hashes

    def withhold(self) -> Withhold:
        """What a reader of the training corpus leaves out (`corpus.stream_split`)."""
        return self.label(), self.withholds

    def report(self, split: str) -> LoadReport:
        """The load report of the held-out `split`."""
        n = len(self.pairs[split][0])
        return LoadReport(split=split, origin=f"{self.origin} (held out)", read=n, kept=n)


_found: dict[str, HeldOut] = {}  # the last corpus's, by `_identity`


def held_out(data: DataConfig) -> HeldOut | None:
    """The held-out splits of `data`'s training corpus (None where none is held out), found by
    one pass over it the first time a process asks."""
    splits = held_out_splits(data)
    if not splits:
        return None
    identity = _identity(data, splits)
    if identity not in _found:
        found = _hold_out(data, splits)
        _found.clear()
        _found[identity] = found
    return _found[identity]


def withhold(data: DataConfig) -> Withhold | None:
    """What a reader of `data`'s training corpus leaves out; None: nothing is held out."""
    found = held_out(data)
    return found.withhold() if found is not None else None


def _identity(data: DataConfig, splits: tuple[str, ...]) -> str:
    """What decides the held-out pairs: the training source, the sizes asked for, and the
    training files as they are now (a file written since is read again)."""
    corpus = data.corpus
    files = files_read(corpus.format, corpus.path or "", key="data.train",
                       src_lang=data.src_lang, tgt_lang=data.tgt_lang)  # fmt: skip
    stats = []
    for path, _ in files:
        try:
            stat = os.stat(path)
        except OSError:
            continue  # the pass names the missing file
        stats.append((str(path.resolve()), stat.st_size, stat.st_mtime_ns))
    asked = {split: getattr(data, split).pairs for split in splits}
    langs = (data.src_lang, data.tgt_lang)
    toy = data.toy.model_dump_json()
    return repr((corpus.model_dump_json(), langs, toy, asked, stats))


def _hold_out(data: DataConfig, splits: tuple[str, ...]) -> HeldOut:
    side = 0 if data.src_lang < data.tgt_lang else 1
    caps = {split: getattr(data, split).pairs or DEFAULT_MAX for split in splits}
    by_parity = {PARITY[split]: split for split in splits}
    heaps: dict[str, list[int]] = {split: [] for split in splits}  # negated: the largest on top
    kept: dict[int, dict[Pair, int]] = {}  # hash -> its distinct pairs, with their index
    stream, cleaner = stream_split(
        data.corpus, split="train", src_lang=data.src_lang, tgt_lang=data.tgt_lang, toy=data.toy
    )
    index = 0
    with tqdm(desc="holding out", unit=" pairs", unit_scale=True, leave=False,
              disable=None, dynamic_ncols=True) as bar:  # fmt: skip
        for chunk in stream:
            for pair in chunk:
                hashed = sentence_hash(pair[side])
                split = by_parity.get(hashed & 1)
                if split is not None:
                    _offer(hashed, pair, index, heaps[split], caps[split], kept)
                index += 1
            bar.update(len(chunk))
    report = cleaner.report()
    pairs: dict[str, tuple[list[str], list[str]]] = {}
    hashes: set[int] = set()
    for split in splits:
        wanted = getattr(data, split).pairs or default_pairs(report.kept)
        chosen = sorted(-h for h in heaps[split])[:wanted]
        hashes.update(chosen)
        rows = sorted((at, pair) for h in chosen for pair, at in kept[h].items())
        pairs[split] = ([pair[0] for _, pair in rows], [pair[1] for _, pair in rows])
    held = sum(len(src) for src, _ in pairs.values())
    if held > MAX_SHARE * report.kept:
        names = " and ".join(f"data.{split}" for split in splits)
        raise DataError(
            f"data.train ({report.origin}) has {report.kept:,} pair{'s' * (report.kept != 1)}: "
            f"too few to hold out {held:,} for {' and '.join(splits)} and train on the rest; "
            f"give {names} (or a smaller `pairs`)"
        )
    return HeldOut(report.origin, pairs, frozenset(hashes), side)


def _offer(
    hashed: int, pair: Pair, index: int, heap: list[int], cap: int, kept: dict[int, dict[Pair, int]]
) -> None:
    """Keep `pair` where its sentence is among the `cap` smallest hashes seen (`heap`)."""
    if hashed in kept:
        kept[hashed].setdefault(pair, index)
    elif len(heap) < cap:
        heapq.heappush(heap, -hashed)
        kept[hashed] = {pair: index}
    elif hashed < -heap[0]:
        del kept[-heapq.heapreplace(heap, -hashed)]
        kept[hashed] = {pair: index}

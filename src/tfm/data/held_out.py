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

Finding them is one pass over the cleaned training pairs: the pass that reads the corpus for
training (`withhold`: `HoldingOut` lets every pair through, then names those held out, which
the reader's caller drops), or one of their own (`held_out`), once a process; the data cache
keeps them, so that a run on a prepared corpus reads none of it (`remember`).
"""

from __future__ import annotations

import hashlib
import heapq
import os
from collections.abc import Iterable
from dataclasses import dataclass

from tqdm import tqdm

from tfm.config import DataConfig
from tfm.data.corpus import LoadReport, stream_split
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
    and the training source as its reader names it (`origin`). A reader's `Withhold` when they
    are known before it reads."""

    origin: str
    pairs: dict[str, tuple[list[str], list[str]]]
    hashes: frozenset[int]
    side: int

    @classmethod
    def of(
        cls, data: DataConfig, pairs: dict[str, tuple[list[str], list[str]]], origin: str
    ) -> HeldOut:
        """The held-out splits `pairs` of `data`'s corpus (as `pairs` holds them), read from
        `origin`."""
        side = _hashed_side(data)
        hashes = frozenset(sentence_hash(text) for split in pairs.values() for text in split[side])
        return cls(origin, pairs, hashes, side)

    @property
    def label(self) -> str:
        """The training report's reason for the pairs this leaves out."""
        return _label(self.pairs)  # its splits

    @property
    def rows(self) -> list[int]:
        """The pairs a read let through that are left out after it: none, all are left out as
        they are read."""
        return []

    def withholds(self, pair: Pair) -> bool:
        """Whether training leaves `pair` out: its sentence is held out."""
        return sentence_hash(pair[self.side]) in self.hashes

    def end_of_read(self, origin: str) -> list[int]:
        return self.rows

    def report(self, split: str) -> LoadReport:
        """The load report of the held-out `split`."""
        n = len(self.pairs[split][0])
        return LoadReport(split=split, origin=f"{self.origin} (held out)", read=n, kept=n)


class HoldingOut:
    """The held-out splits of `data`'s training corpus, chosen by the read that takes its
    training pairs: that read lets every pair through (`withholds` is False) and offers it;
    at its end (`end_of_read`) the splits are chosen (`found`), and the pairs let through that
    they take are named by their indices among those (`rows`), which the reader's caller drops.
    A later read (a repeat, another corpus) leaves out the pairs of the held-out sentences."""

    def __init__(self, data: DataConfig, splits: tuple[str, ...]) -> None:
        self.data, self.splits = data, splits
        self.side = _hashed_side(data)
        self.caps = {split: getattr(data, split).pairs or DEFAULT_MAX for split in splits}
        self.by_parity = {PARITY[split]: split for split in splits}
        self.heaps: dict[str, list[int]] = {split: [] for split in splits}  # negated: max on top
        self.kept: dict[int, dict[Pair, list[int]]] = {}  # hash -> its distinct pairs' indices
        self.index = 0  # of the next pair let through
        self.found: HeldOut | None = None
        self.rows: list[int] = []

    @property
    def label(self) -> str:
        return _label(self.splits)

    def withholds(self, pair: Pair) -> bool:
        if self.found is not None:
            return self.found.withholds(pair)
        hashed = sentence_hash(pair[self.side])
        split = self.by_parity.get(hashed & 1)
        if split is not None:
            _offer(hashed, pair, self.index, self.heaps[split], self.caps[split], self.kept)
        self.index += 1
        return False

    def end_of_read(self, origin: str) -> list[int]:
        if self.found is not None:
            return []
        self.found = self._choose(origin)
        remember(self.data, self.found)
        return self.rows

    def _choose(self, origin: str) -> HeldOut:
        n_kept = self.index
        pairs: dict[str, tuple[list[str], list[str]]] = {}
        hashes: set[int] = set()
        for split in self.splits:
            wanted = getattr(self.data, split).pairs or default_pairs(n_kept)
            chosen = sorted(-h for h in self.heaps[split])[:wanted]
            hashes.update(chosen)
            rows = sorted((at[0], pair) for h in chosen for pair, at in self.kept[h].items())
            pairs[split] = ([pair[0] for _, pair in rows], [pair[1] for _, pair in rows])
            self.rows += [i for h in chosen for at in self.kept[h].values() for i in at]
        self.rows.sort()
        held = sum(len(src) for src, _ in pairs.values())
        if held > MAX_SHARE * n_kept:
            names = " and ".join(f"data.{split}" for split in self.splits)
            raise DataError(
                f"data.train ({origin}) has {n_kept:,} pair{'s' * (n_kept != 1)}: too few to "
                f"hold out {held:,} for {' and '.join(self.splits)} and train on the rest; "
                f"give {names} (or a smaller `pairs`)"
            )
        return HeldOut(origin, pairs, frozenset(hashes), self.side)


_found: dict[str, HeldOut] = {}  # the last corpus's, by `_identity`


def held_out(data: DataConfig) -> HeldOut | None:
    """The held-out splits of `data`'s training corpus (None where none is held out): those
    this process has found or been told of (`remember`), else found by one pass over it."""
    splits = held_out_splits(data)
    if not splits:
        return None
    return _found.get(_identity(data, splits)) or _hold_out(data, splits)


def withhold(data: DataConfig) -> HeldOut | HoldingOut | None:
    """What a reader of `data`'s training corpus leaves out (None: nothing is held out): the
    held-out splits where this process knows them, else a `HoldingOut` that finds them in that
    read (its caller then drops the pairs at its `rows` from what the read kept)."""
    splits = held_out_splits(data)
    if not splits:
        return None
    return _found.get(_identity(data, splits)) or HoldingOut(data, splits)


def remember(data: DataConfig, found: HeldOut) -> None:
    """Keep `found` as the held-out splits of `data`'s training corpus as its files are now,
    for the rest of this process."""
    _found.clear()
    _found[_identity(data, held_out_splits(data))] = found


def _label(splits: Iterable[str]) -> str:
    return f"held out for {' and '.join(splits)}"


def _hashed_side(data: DataConfig) -> int:
    """The side whose sentence is hashed: the one in the language whose code sorts first."""
    return 0 if data.src_lang < data.tgt_lang else 1


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
    holding = HoldingOut(data, splits)
    stream, cleaner = stream_split(
        data.corpus, split="train", src_lang=data.src_lang, tgt_lang=data.tgt_lang, toy=data.toy,
        withhold=holding,
    )  # fmt: skip
    with tqdm(desc="holding out", unit=" pairs", unit_scale=True, leave=False,
              disable=None, dynamic_ncols=True) as bar:  # fmt: skip
        for chunk in stream:
            bar.update(len(chunk))
    cleaner.report()  # a corpus with no pair left is named as the training read names it
    assert holding.found is not None  # chosen at the end of the read
    return holding.found


def _offer(
    hashed: int,
    pair: Pair,
    index: int,
    heap: list[int],
    cap: int,
    kept: dict[int, dict[Pair, list[int]]],
) -> None:
    """Keep `pair` where its sentence is among the `cap` smallest hashes seen (`heap`)."""
    if hashed in kept:
        kept[hashed].setdefault(pair, []).append(index)
    elif len(heap) < cap:
        heapq.heappush(heap, -hashed)
        kept[hashed] = {pair: [index]}
    elif hashed < -heap[0]:
        del kept[-heapq.heapreplace(heap, -hashed)]
        kept[hashed] = {pair: [index]}

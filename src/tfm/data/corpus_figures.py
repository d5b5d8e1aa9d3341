"""What a training corpus is, measured from its raw pairs before BPE: how many pairs, words and
characters per sentence, distinct word types and characters, the scripts each side is written
in, and how many pairs have the same text on both sides. The recipe sizes the BPE vocabulary
(`vocabulary.py`) and checks the corpus from them; the data cache measures them in the pass that
reads the corpus (`FigureCounter`) and keeps them, so that a later run need not read it again.

Words of a script written without spaces (Chinese, Japanese, Thai …) are its characters, so
that "words per sentence" and "word types" mean the same thing in every script.

Two figures tell lines out of step (a line missing from one file shifts every pair after it):
`off_ratio`, the share of the sampled pairs whose ratio of source to target words is more than
`OFF_RATIO` times the sample's median either way, and `length_correlation`, the correlation of
the two sides' log word counts. Aligned corpora have under 1% of their pairs off and a
correlation near 0.8, the same one line behind a tenth or more and near 0; a noisy but aligned
corpus can have many pairs off, yet lengths that follow each other (docs/experiments.md).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tfm.data.words import word_counts

SAMPLE = 50_000  # pairs whose characters and word types are counted; the rest only counted
UNSPACED = frozenset({"CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN"})
_WORD = re.compile(r"\w+", re.UNICODE)
OFF_RATIO = 2.0


@dataclass(frozen=True)
class SideFigures:
    """One side of the corpus: words and characters per sentence (mean), word types and
    distinct characters (in the sample), and its scripts by share of letters, largest first."""

    words: float
    chars: float
    types: int
    distinct_chars: int
    scripts: tuple[tuple[str, float], ...]

    @property
    def script(self) -> str:
        """The main script, as Unicode names it (LATIN, CYRILLIC, CJK …)."""
        return self.scripts[0][0] if self.scripts else "NONE"

    @property
    def unspaced(self) -> bool:
        """Whether most of its letters belong to a script written without spaces."""
        return sum(share for name, share in self.scripts if name in UNSPACED) > 0.5


@dataclass(frozen=True)
class TextFigures:
    """The raw training pairs: their count, each side, the share of pairs whose two sides are
    the same text, and how well the lengths of the two sides agree (`off_ratio`,
    `length_correlation`: see the module's docstring)."""

    pairs: int
    src: SideFigures
    tgt: SideFigures
    identical: float
    off_ratio: float = 0.0
    length_correlation: float = 1.0

    @property
    def types(self) -> int:
        return self.src.types + self.tgt.types

    @property
    def distinct_chars(self) -> int:
        return self.src.distinct_chars + self.tgt.distinct_chars

    def record(self) -> dict:
        """As plain values (JSON), for `figures_from`."""
        return asdict(self)


def measure_texts(src: Sequence[str], tgt: Sequence[str]) -> TextFigures:
    """The figures of the raw pairs `src`/`tgt` (see `TextFigures`); characters and word types
    are counted in the first `SAMPLE` pairs."""
    counter = FigureCounter()
    counter.add(src, tgt)
    return counter.figures()


class FigureCounter:
    """`measure_texts` over pairs that come in chunks (a corpus read once, as it streams): every
    pair counted, the first `SAMPLE` kept to measure."""

    def __init__(self) -> None:
        self.pairs, self.identical = 0, 0
        self.sample: tuple[list[str], list[str]] = ([], [])

    def add(self, src: Sequence[str], tgt: Sequence[str]) -> None:
        self.pairs += len(src)
        self.identical += sum(a.strip() == b.strip() for a, b in zip(src, tgt, strict=True))
        room = SAMPLE - len(self.sample[0])
        if room > 0:
            self.sample[0].extend(src[:room])
            self.sample[1].extend(tgt[:room])

    def figures(self) -> TextFigures:
        return TextFigures(
            pairs=self.pairs,
            src=_side(self.sample[0]),
            tgt=_side(self.sample[1]),
            identical=self.identical / self.pairs if self.pairs else 0.0,
            **alignment(*self.sample),
        )


def figures_from(record: dict) -> TextFigures:
    """The figures `TextFigures.record()` wrote."""
    src, tgt = (
        SideFigures(**{**record[side], "scripts": tuple(map(tuple, record[side]["scripts"]))})
        for side in ("src", "tgt")
    )
    alignment = {k: record[k] for k in ("off_ratio", "length_correlation") if k in record}
    return TextFigures(
        pairs=record["pairs"], src=src, tgt=tgt, identical=record["identical"], **alignment
    )


def alignment(src: Sequence[str], tgt: Sequence[str]) -> dict[str, float]:
    """`off_ratio` and `length_correlation` of the pairs (`words.word_count` words, plus one
    each); a correlation of 1 where a side's lengths do not vary (no sign either way)."""
    if not src:
        return {}
    counts = np.array([word_counts(src), word_counts(tgt)], dtype=np.int64)
    outliers, _ = ratio_outliers(counts[0], counts[1], OFF_RATIO)
    logs = np.log(counts + 1)
    correlation = 1.0 if min(logs.std(axis=1)) == 0 else float(np.corrcoef(logs)[0, 1])
    return {"off_ratio": len(outliers) / len(src), "length_correlation": correlation}


def ratio_outliers(
    src_words: np.ndarray, tgt_words: np.ndarray, limit: float
) -> tuple[np.ndarray, float]:
    """The pairs (their indices) whose ratio of source to target words, (src + 1) / (tgt + 1),
    is more than `limit` times the usual one (the median) either way, and the median.
    Languages differ in words a sentence (Turkish has fewer than English; Japanese, a word a
    character, about twice as many): it is a pair's distance from its corpus's ratio that
    suggests a misaligned line."""
    if not len(src_words):
        return np.zeros(0, dtype=np.int64), 1.0
    ratios = (src_words + 1) / (tgt_words + 1)
    median = float(np.median(ratios))
    off = ratios / median
    return np.flatnonzero(np.maximum(off, 1 / off) > limit), median


def _side(texts: Sequence[str]) -> SideFigures:
    chars: Counter[str] = Counter()
    for text in texts:
        chars.update(text)
    scripts = _scripts(chars)
    unspaced = {c for c in chars if letter_script(c) in UNSPACED}
    types: set[str] = set()
    words = 0
    for text in texts:
        for word in _WORD.findall(text):
            if unspaced and any(c in unspaced for c in word):
                pieces = list(word)  # a script without spaces: each character a word
            else:
                pieces = [word]
            words += len(pieces)
            types.update(pieces)
    n = max(len(texts), 1)
    letters = sum(chars.values()) - chars.get(" ", 0)
    return SideFigures(
        words=words / n,
        chars=letters / n,
        types=len(types),
        distinct_chars=len(chars),
        scripts=scripts,
    )


def _scripts(chars: Counter[str]) -> tuple[tuple[str, float], ...]:
    """Letters by script (the first word of their Unicode name), as shares, largest first."""
    counts: Counter[str] = Counter()
    for char, n in chars.items():
        if char.isalpha():
            counts[letter_script(char)] += n
    total = sum(counts.values()) or 1
    return tuple((name, n / total) for name, n in counts.most_common())


def letter_script(char: str) -> str:
    """The script of `char`: the first word of its Unicode name (LATIN, CYRILLIC, CJK …)."""
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0] if name else "UNKNOWN"

"""What a training corpus is, measured: the figures a recipe is derived from.

Two kinds of figures, taken at two moments of preparation:

- `TextFigures`, from the raw sentence pairs before BPE: how many pairs, words and characters
  per sentence, distinct word types and characters, the scripts each side is written in, and
  how many pairs have the same text on both sides. The BPE vocabulary size is chosen from them.
- `TokenFigures`, from the encoded training split: BPE tokens per sentence on each side, and
  the batch tokens an epoch takes. Everything sized in tokens (model, batch, steps) follows.

Words of a script written without spaces (Chinese, Japanese, Thai …) are its characters, so
that "words per sentence" and "word types" mean the same thing in every script.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SAMPLE = 50_000  # pairs whose characters and word types are counted; the rest only counted
UNSPACED = frozenset({"CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN"})
_WORD = re.compile(r"\w+", re.UNICODE)


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
    """The raw training pairs: their count, each side, and the share of pairs whose two sides
    are the same text."""

    pairs: int
    src: SideFigures
    tgt: SideFigures
    identical: float

    @property
    def types(self) -> int:
        return self.src.types + self.tgt.types

    @property
    def distinct_chars(self) -> int:
        return self.src.distinct_chars + self.tgt.distinct_chars


@dataclass(frozen=True)
class TokenFigures:
    """The encoded training split: pairs, BPE tokens per sentence on each side (mean and 95th
    percentile, framing excluded), and `batch_tokens`, what an epoch costs in batch tokens
    (each pair counted at its longer framed side, as batches are)."""

    pairs: int
    src_mean: float
    tgt_mean: float
    src_p95: float
    tgt_p95: float
    tgt_tokens: int
    batch_tokens: int


def measure_texts(src: Sequence[str], tgt: Sequence[str]) -> TextFigures:
    """The figures of the raw pairs `src`/`tgt` (see `TextFigures`); characters and word types
    are counted in the first `SAMPLE` pairs."""
    n = len(src)
    identical = sum(a.strip() == b.strip() for a, b in zip(src, tgt, strict=True))
    return TextFigures(
        pairs=n,
        src=_side(src[:SAMPLE]),
        tgt=_side(tgt[:SAMPLE]),
        identical=identical / n if n else 0.0,
    )


def measure_tokens(src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> TokenFigures:
    """The figures of the framed id lengths of a training split (source: ids + EOS; target:
    BOS + ids + EOS)."""
    src = np.asarray(src_lengths, dtype=np.int64) - 1
    tgt = np.asarray(tgt_lengths, dtype=np.int64) - 2
    if not len(src):
        return TokenFigures(0, 0.0, 0.0, 0.0, 0.0, 0, 0)
    widths = np.maximum(src + 1, tgt + 2)  # as batches count a pair: its longer framed side
    return TokenFigures(
        pairs=len(src),
        src_mean=float(src.mean()),
        tgt_mean=float(tgt.mean()),
        src_p95=float(np.percentile(src, 95)),
        tgt_p95=float(np.percentile(tgt, 95)),
        tgt_tokens=int(tgt.sum()),
        batch_tokens=int(widths.sum()),
    )


def _side(texts: Sequence[str]) -> SideFigures:
    chars: Counter[str] = Counter()
    for text in texts:
        chars.update(text)
    scripts = _scripts(chars)
    unspaced = {c for c in chars if _script(c) in UNSPACED}
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
            counts[_script(char)] += n
    total = sum(counts.values()) or 1
    return tuple((name, n / total) for name, n in counts.most_common())


def _script(char: str) -> str:
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0] if name else "UNKNOWN"

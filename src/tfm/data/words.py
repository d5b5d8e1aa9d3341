"""Words as `tfm data check` and the training diagnostics count them, in every script; and
whether a text is written in a script without spaces (BLEU then scores its characters).

A word is a piece of text between spaces, except in the scripts written without spaces between
words (Chinese, Japanese, Thai, Lao, Khmer, Myanmar, Tibetan), where each character is one, as
the recipe's corpus figures count them (`corpus_figures.py`). Split on spaces alone, a Japanese
sentence is one "word": every en–ja pair would look misaligned (1 word against 8), and a decoder
that loops inside it ("のののののの") would repeat no word at all.

The scripts are found by their Unicode blocks (below), so that a sentence is split by one
regular expression, not a lookup per character; a sentence in other scripts is split on spaces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# The Unicode blocks of the scripts written without spaces, and the CJK punctuation and
# full-width forms written among them (each of those a word of its own, like the characters).
UNSPACED_BLOCKS = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x0F00, 0x0FFF),  # Tibetan
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer symbols
    (0x2E80, 0x2FDF),  # CJK and Kangxi radicals
    (0x3001, 0x303F),  # CJK symbols and punctuation (not the ideographic space, U+3000)
    (0x3040, 0x309F),  # Hiragana
    (0x30A0, 0x30FF),  # Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK unified ideographs, extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA9E0, 0xA9FF),  # Myanmar extended B
    (0xAA60, 0xAA7F),  # Myanmar extended A
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF01, 0xFF9F),  # full-width forms and half-width Katakana
    (0x1AFF0, 0x1B16F),  # Kana extended and supplement, small Kana
    (0x20000, 0x2FA1F),  # CJK unified ideographs, extensions B to F, compatibility supplement
    (0x30000, 0x323AF),  # CJK unified ideographs, extensions G and H
)
_CLASS = "".join(f"\\U{first:08x}-\\U{last:08x}" for first, last in UNSPACED_BLOCKS)
_UNSPACED = re.compile(f"[{_CLASS}]")
# Every block lies at or above the first: a text with no character there (Latin, Cyrillic,
# Greek, Arabic, Hebrew, Devanagari …) is told apart by one range, about fifty times faster.
_AT_OR_ABOVE = re.compile(f"[\\U{UNSPACED_BLOCKS[0][0]:08x}-\\U0010ffff]")
_WORD = re.compile(f"[{_CLASS}]|[^\\s{_CLASS}]+")


def words(text: str) -> list[str]:
    """The words of `text`: the pieces between spaces, each character of a script written
    without spaces one of its own ("私はiPhoneを買った" → 私, は, iPhone, を, 買, っ, た)."""
    return _WORD.findall(text) if unspaced(text) else text.split()


def word_count(text: str) -> int:
    """How many `words` `text` has."""
    return len(words(text))


def word_counts(texts: Iterable[str]) -> list[int]:
    """`word_count` of each of `texts` (one call for a corpus's worth)."""
    return [word_count(text) for text in texts]


def unspaced(text: str) -> bool:
    """Whether `text` holds a character of a script written without spaces (ASCII text, and
    text with nothing from the first block up, are told apart without the blocks' search)."""
    if text.isascii() or _AT_OR_ABOVE.search(text) is None:
        return False
    return _UNSPACED.search(text) is not None

"""Looking at a split's text before it is cleaned: characters that should not be in sentences,
and where the pairs that loading drops came from.

Control characters (Unicode category Cc but tab: C0, DEL and C1, a NUL among them) and U+FFFD,
the replacement character that text which was not decoded cleanly carries, would each become a
subword of their own and teach the model noise. `data.control_chars` says what to do: `warn`
(default) logs their count per character and the first file:line they are on; `refuse` stops
with that line. A tab inside a `text` line and a carriage return inside a line are ordinary
(the latter is reported by the file readers).

`LoadReport` (corpus.py) names the first line of each kind of dropped pair through
`first_lines`, so that a split's drops are reported once, with where to look.
"""

from __future__ import annotations

import bisect
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence

from tfm.config import SourceConfig
from tfm.data.formats import Pairs
from tfm.errors import DataError

log = logging.getLogger(__name__)

UNWANTED = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ufffd]")
SHOWN = 3  # positions named in a report


class CharacterScreen:
    """Looks at each pair as it is read (`look`), then warns once (`report`); with `policy`
    "refuse" it stops at the first pair holding an unwanted character. `where(index, side)`
    names pair `index`'s file and line (or dataset row)."""

    def __init__(self, *, split: str, policy: str, where: Callable[[int, int], str]) -> None:
        self.split, self.policy, self.where = split, policy, where
        self.counts: Counter[str] = Counter()
        self.first: str | None = None  # where the first one is
        self.n_pairs = 0

    def look(self, index: int, src: str, tgt: str) -> None:
        found = False
        for side, text in enumerate((src, tgt)):
            if UNWANTED.search(text) is None:
                continue
            characters = UNWANTED.findall(text)
            self.counts.update(characters)
            found = True
            if self.first is None:
                self.first = self.where(index, side)
                if self.policy == "refuse":
                    raise DataError(
                        f"{self.first}: {describe(characters[0])} in the text "
                        f"(data.control_chars is refuse; clean data.{self.split} or set "
                        "data.control_chars: warn)"
                    )
        self.n_pairs += found

    def report(self) -> None:
        """The warning, when any pair held such characters."""
        if self.first is None:
            return
        kinds = ", ".join(f"{n:,} × {describe(c)}" for c, n in self.counts.most_common(SHOWN))
        more = f" and {len(self.counts) - SHOWN} more kinds" if len(self.counts) > SHOWN else ""
        log.warning(
            "data.%s: %d pair(s) hold control or replacement characters (%s%s), first at %s; "
            "each becomes a subword of its own. Clean the data, or set data.control_chars: "
            "refuse to stop on them", self.split, self.n_pairs, kinds, more, self.first,
        )  # fmt: skip


def screen_characters(
    pairs: Pairs, *, source: SourceConfig, split: str, src_lang: str, tgt_lang: str, policy: str
) -> None:
    """Warn about (or, with `policy` "refuse", refuse) the unwanted characters in `pairs`."""
    langs = (src_lang, tgt_lang)

    def where(index: int, side: int) -> str:
        return location(source, pairs.origin, pairs.unit, index, langs[side])

    screen = CharacterScreen(split=split, policy=policy, where=where)
    for index, (src, tgt) in enumerate(zip(pairs.src, pairs.tgt, strict=True)):
        screen.look(index, src, tgt)
    screen.report()


_C0 = (
    "NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI "
    "DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC FS GS RS US"
).split()


def describe(character: str) -> str:
    """'U+0000 NUL', 'U+FFFD REPLACEMENT CHARACTER': the code point and its usual name."""
    code = ord(character)
    if code < len(_C0):
        name = _C0[code]
    else:
        name = unicodedata.name(character, "DEL" if code == 0x7F else "C1 control")
    return f"U+{code:04X} {name}"


def location(source: SourceConfig, origin: str, unit: str, index: int, lang: str) -> str:
    """file:line of pair `index` (on the side in language `lang`), or the dataset row."""
    if unit != "line":
        return f"{origin} row {index}"
    if source.format == "text":
        return f"{source.path}.{lang}:{index + 1}"
    return f"{source.path}:{index + 1}"


def first_lines(kept_indices: Sequence[int], skipped: Sequence[int], unit: str) -> list[int]:
    """Line (from 1) or row (from 0) numbers in the file of the first SHOWN pairs `kept_indices`
    (indices into the pairs left after those at the sorted indices `skipped` were dropped)."""
    positions = []
    for kept in kept_indices[:SHOWN]:
        index = kept  # the smallest index with `kept` pairs left before it
        while True:
            before = bisect.bisect_right(skipped, index)
            if index - before == kept:
                break
            index = kept + before
        positions.append(index + 1 if unit == "line" else index)
    return positions

"""Looking at a split's text before it is cleaned: characters that should not be in sentences,
and where the pairs that loading drops came from.

Control characters (Unicode category Cc but tab: C0, DEL and C1, a NUL among them) and U+FFFD,
the replacement character that text which was not decoded cleanly carries, would each become a
subword of their own and teach the model noise. `data.control_chars` says what to do: `warn`
(default) logs their count per character and the first file:line they are on; `refuse` stops
with that line. A tab inside a `text` line and a carriage return inside a line are ordinary
(the latter is reported by the file readers).

The screen watches the pairs as they stream in, a chunk at a time (`corpus.stream_split`):
"refuse" stops at the first such character; "warn" counts them and warns when the split has been
read. The data cache keeps what was found, so that a run that maps a prepared split warns (or
refuses) as well.
`LoadReport` (corpus.py) names the first line of each kind of dropped pair through
`first_lines`, so that a split's drops are reported once, with where to look.
"""

from __future__ import annotations

import bisect
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from tfm.config import SourceConfig
from tfm.errors import DataError

log = logging.getLogger(__name__)

UNWANTED = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ufffd]")
SHOWN = 3  # positions named in a report


class CharacterScreen:
    """Watches a split's raw pairs as they stream past (`watch`), counting the unwanted
    characters; with `policy` "refuse", the first one stops the stream with its file:line
    ("warn" and "count" only count; see `report_characters`)."""

    def __init__(
        self,
        *,
        source: SourceConfig,
        split: str,
        origin: str,
        unit: str,
        langs: tuple[str, str],
        policy: str,
    ) -> None:
        self.source, self.split, self.origin, self.unit = source, split, origin, unit
        self.langs, self.policy = langs, policy
        self.counts: Counter[str] = Counter()
        self.pairs = 0
        self.first: str | None = None  # where the first one is

    def watch(self, chunks: Iterable[list[tuple[str, str]]]) -> Iterator[list[tuple[str, str]]]:
        """Pass `chunks` of pairs (`formats.chunked`) on, each once it has been looked at."""
        start = 0
        for chunk in chunks:
            for index, texts in enumerate(chunk, start):
                if UNWANTED.search(texts[0]) or UNWANTED.search(texts[1]):
                    self._count(index, texts)
            start += len(chunk)
            yield chunk

    def _count(self, index: int, texts: tuple[str, str]) -> None:
        self.pairs += 1
        for side, text in enumerate(texts):
            characters = UNWANTED.findall(text)
            self.counts.update(describe(c) for c in characters)
            if characters and self.first is None:
                self.first = f"{self._where(index, side)}: {describe(characters[0])}"
                if self.policy == "refuse":
                    raise DataError(
                        f"{self.first} in the text (data.control_chars is refuse; clean the "
                        f"data of data.{self.split})"
                    )

    def _where(self, index: int, side: int) -> str:
        """file:line of pair `index` (on `side`), or the dataset row."""
        if self.unit != "line":
            return f"{self.origin} row {index}"
        if self.source.format == "text":
            return f"{self.source.path}.{self.langs[side]}:{index + 1}"
        return f"{self.source.path}:{index + 1}"

    def found(self) -> dict | None:
        """What was found, JSON-ready (the data cache keeps it), or None."""
        if self.first is None:
            return None
        return {"pairs": self.pairs, "counts": dict(self.counts), "first": self.first}


def report_characters(found: dict | None, *, split: str, policy: str) -> None:
    """Warn about what a screen `found` (or refuse it, with `policy` "refuse": a split read
    before, under "warn", as the data cache keeps it). "count": say nothing (yet)."""
    if found is None or policy == "count":
        return
    if policy == "refuse":
        raise DataError(f"{found['first']} in the text (data.control_chars is refuse; clean the "
                        f"data of data.{split})")  # fmt: skip
    counts = Counter(found["counts"])
    kinds = ", ".join(f"{n:,} × {name}" for name, n in counts.most_common(SHOWN))
    more = f" and {len(counts) - SHOWN} more kinds" if len(counts) > SHOWN else ""
    log.warning(
        "data.%s: %d pair(s) hold control or replacement characters (%s%s), first at %s; "
        "each becomes a subword of its own. Clean the data, or set data.control_chars: refuse "
        "to stop on them", split, found["pairs"], kinds, more, found["first"],
    )  # fmt: skip


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


def first_lines(kept_indices: Sequence[int], skipped: Sequence[int], unit: str) -> list[int]:
    """Line (from 1) or row (from 0) numbers in the file of the first SHOWN pairs `kept_indices`
    (indices into the pairs left after those at the sorted indices `skipped` were dropped)."""
    positions = read_indices(kept_indices[:SHOWN], skipped)
    return [index + 1 for index in positions] if unit == "line" else positions


def read_indices(kept_indices: Sequence[int], skipped: Sequence[int]) -> list[int]:
    """The indices among the pairs read of the pairs `kept_indices` (indices into the pairs
    left after those at the sorted indices `skipped` were dropped)."""
    positions = []
    for kept in kept_indices:
        index = kept  # the smallest index with `kept` pairs left before it
        while True:
            before = bisect.bisect_right(skipped, index)
            if index - before == kept:
                break
            index = kept + before
        positions.append(index)
    return positions

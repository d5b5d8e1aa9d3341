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
from collections.abc import Sequence

from tfm.config import SourceConfig
from tfm.data.formats import Pairs
from tfm.errors import DataError

log = logging.getLogger(__name__)

UNWANTED = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ufffd]")
SHOWN = 3  # positions named in a report


def screen_characters(
    pairs: Pairs, *, source: SourceConfig, split: str, src_lang: str, tgt_lang: str, policy: str
) -> None:
    """Warn about (or, with `policy` "refuse", refuse) the unwanted characters in `pairs`."""
    counts: Counter[str] = Counter()
    first: tuple[int, int, str] | None = None  # pair index, side, character
    n_pairs = 0
    for index, texts in enumerate(zip(pairs.src, pairs.tgt, strict=True)):
        found = False
        for side, text in enumerate(texts):
            if UNWANTED.search(text) is None:
                continue
            characters = UNWANTED.findall(text)
            counts.update(characters)
            found = True
            if first is None:
                first = (index, side, characters[0])
        n_pairs += found
    if first is None:
        return
    index, side, character = first
    where = _where(pairs, source, index, side, (src_lang, tgt_lang))
    if policy == "refuse":
        raise DataError(
            f"{where}: {describe(character)} in the text (data.control_chars is refuse; "
            f"{sum(counts.values()):,} such characters in {n_pairs:,} pairs of data.{split})"
        )
    kinds = ", ".join(f"{n:,} × {describe(c)}" for c, n in counts.most_common(SHOWN))
    more = f" and {len(counts) - SHOWN} more kinds" if len(counts) > SHOWN else ""
    log.warning(
        "data.%s: %d pair(s) hold control or replacement characters (%s%s), first at %s; each "
        "becomes a subword of its own. Clean the data, or set data.control_chars: refuse to stop "
        "on them", split, n_pairs, kinds, more, where,
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


def _where(
    pairs: Pairs, source: SourceConfig, index: int, side: int, langs: tuple[str, str]
) -> str:
    """file:line of pair `index` (on `side`), or the dataset row."""
    if pairs.unit != "line":
        return f"{pairs.origin} row {index}"
    if source.format == "text":
        return f"{source.path}.{langs[side]}:{index + 1}"
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

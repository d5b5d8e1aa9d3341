"""Encoding millions of sentences for the data cache: the tokenizer's own ids, found faster.

`tokenizers` spends about 1 µs of CPU on every word it pre-tokenizes, whatever the model behind
it; on a corpus of millions of sentences that is most of the preparation. tfm's pre-tokenizer
(`tfm.data.tokenizer`) is simple enough to be one regular expression once each character is
known to be punctuation, a digit or neither, and on a big corpus almost every word comes back,
so `BulkEncoder` finds the same ids another way, none of them different:

- The normalizer (NFC, each run of whitespace to one space, strip) is run only on the sentences
  it would change (`needs_normalizing`): most are already what it makes of them.
- Each character is classified once by asking the tokenizer's own pre-tokenizer how it splits
  it; then the pieces of a whole chunk of sentences come from one `re.findall`.
- Each distinct piece is segmented once by the BPE model and remembered (`Segmentations`), so
  the ids of a chunk are gathered from the remembered segmentations with numpy.

A tag at the start of a sentence (`<bt> `, which tfm puts there) is its one id before the
sentence's own. A sentence the expression cannot speak for (one holding "▁" itself, a tag
elsewhere or a character whose split is none of the three, or an empty one) is encoded by
`tokenizers` as before, as is everything when the tokenizer is not tfm's own pipeline (`fits`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer as HfTokenizer

from tfm.data.tokenizer import SPACE, untrained

MAX_PIECES = 500_000  # distinct pieces remembered; past this the memory starts afresh

# Every character but the space that Python counts as whitespace (str.isspace): Unicode's
# White_Space, which the normalizer's regex matches, and the separators U+001C to U+001F.
OTHER_SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_OTHER_SPACE = re.compile(f"[{re.escape(OTHER_SPACES)}]")
PUNCTUATION, DIGIT, WORD, ALONE, BLANK = "punctuation", "digit", "word", "alone", "space"
_NEWLINE = "\n"  # between the sentences of a chunk: never in a normalized sentence
_NO_SPECIALS = {"add_special_tokens": False}


class BulkEncoder:
    """The ids of `tok.encode_batch_fast(texts, add_special_tokens=False)`, for many texts."""

    def __init__(self, tok: HfTokenizer) -> None:
        self.full, self.normalizer = tok, tok.normalizer
        self.tags = {added.content: i for i, added in tok.get_added_tokens_decoder().items()}
        self.plain = HfTokenizer.from_str(tok.to_str())  # for normalized text
        self.plain.normalizer = None
        self.fast = fits(tok)
        self.segmentations = Segmentations(tok)
        # character -> PUNCTUATION, DIGIT, WORD or ALONE; the space is Metaspace's
        self.classes: dict[str, str] = {" ": BLANK}
        self._pattern: tuple[tuple[int, int], re.Pattern[str]] | None = None

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The ids of all texts one after another (int64), and each text's number of ids."""
        texts = list(texts)
        if not self.fast:
            return _flat([e.ids for e in self.full.encode_batch_fast(texts, **_NO_SPECIALS)])
        if self.tags:
            return self._tagged(texts)
        return self._encode(texts)

    def _tagged(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """`encode` of texts that may start with a tag: its id, then the rest's ids. A text with
        a tag elsewhere goes to `tokenizers` whole (it normalizes each side of a tag apart)."""
        anywhere = re.compile("|".join(map(re.escape, self.tags)))
        ids: list[list[int] | None] = [None] * len(texts)
        fast, rest, first = [], [], []
        for i, text in enumerate(texts):
            tag = next((token for token in self.tags if text.startswith(token)), None)
            after = text[len(tag) :] if tag else text
            if anywhere.search(after):
                ids[i] = self.full.encode(text, add_special_tokens=False).ids
            else:
                fast.append(i)
                rest.append(after)
                first.append(self.tags.get(tag or "", -1))
        flat, lengths = self._encode(rest)
        rows = np.split(flat, np.cumsum(lengths)[:-1]) if rest else []
        for i, tag_id, row in zip(fast, first, rows, strict=True):
            ids[i] = [tag_id, *row.tolist()] if tag_id >= 0 else row.tolist()
        return _flat([row for row in ids if row is not None])

    def _encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        for i in needs_normalizing(texts):
            texts[i] = self.normalizer.normalize_str(texts[i])
        alone = self._alone(texts)
        if not alone:
            return self._split(texts)
        taken = set(alone)
        rest = [i for i in range(len(texts)) if i not in taken]
        ids: list[list[int]] = [[] for _ in texts]
        if rest:
            flat, lengths = self._split([texts[i] for i in rest])
            for i, row in zip(rest, np.split(flat, np.cumsum(lengths)[:-1]), strict=True):
                ids[i] = row.tolist()
        encoded = self.plain.encode_batch_fast([texts[i] for i in alone], **_NO_SPECIALS)
        for i, encoding in zip(alone, encoded, strict=True):
            ids[i] = encoding.ids
        return _flat(ids)

    def _alone(self, texts: list[str]) -> list[int]:
        """The texts left to `tokenizers`: empty ones, or with a character of class ALONE."""
        for char in characters("".join(texts)) - self.classes.keys():
            self.classes[char] = classify(self.plain, char)
        alone = [c for c, kind in self.classes.items() if kind == ALONE]
        found = _containing(texts, re.compile(f"[{re.escape(''.join(alone))}]")) if alone else []
        return sorted({*found, *(i for i, text in enumerate(texts) if not text)})

    def _split(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        if not texts:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        # Metaspace: each space, and the start of each text, becomes SPACE glued to what follows.
        joined = _NEWLINE.join(texts).replace(" ", SPACE).replace(_NEWLINE, _NEWLINE + SPACE)
        pieces = self._pieces().findall(SPACE + joined)
        codes = self.segmentations.codes(pieces)
        flat, ends = self.segmentations.gather(codes)
        breaks = np.concatenate([[0], ends[codes == 0], [len(flat)]])  # code 0 is the newline
        return flat, np.diff(breaks)

    def _pieces(self) -> re.Pattern[str]:
        """tfm's pre-tokenizer as one pattern: Metaspace's words, each punctuation mark apart
        (with the SPACE before it), runs of digits apart; and the newline between texts."""
        punctuation = "".join(c for c, kind in self.classes.items() if kind == PUNCTUATION)
        digits = "".join(c for c, kind in self.classes.items() if kind == DIGIT)
        key = (len(punctuation), len(digits))  # classes are only ever added
        if self._pattern is None or self._pattern[0] != key:
            p, d = re.escape(punctuation), re.escape(digits)
            parts = [f"{SPACE}?[{p}]" if p else "", f"[{d}]+" if d else ""]
            parts += [f"{SPACE}?[^{p}{d}{SPACE}{_NEWLINE}]+", SPACE, _NEWLINE]
            self._pattern = key, re.compile("|".join(part for part in parts if part))
        return self._pattern[1]


class Segmentations:
    """Each distinct piece's BPE ids, found once by the model alone and kept as numpy arrays."""

    def __init__(self, tok: HfTokenizer) -> None:
        self.model = HfTokenizer.from_str(tok.to_str())  # a piece in, its ids out
        self.model.normalizer = self.model.pre_tokenizer = None
        self._clear()

    def _clear(self) -> None:
        self.index = {_NEWLINE: 0}  # piece -> code
        self.ids = np.empty(0, np.int64)  # every piece's ids, one after another
        self.starts = np.zeros(1, np.int64)  # of each code's ids in `ids`
        self.lengths = np.zeros(1, np.int64)

    def codes(self, pieces: list[str]) -> np.ndarray:
        """Each piece's code, after segmenting the pieces not seen before."""
        if len(self.index) > MAX_PIECES:
            self._clear()
        new = [piece for piece in dict.fromkeys(pieces) if piece not in self.index]
        if new:
            found = [e.ids for e in self.model.encode_batch_fast(new, **_NO_SPECIALS)]
            ids, lengths = _flat(found)
            starts = len(self.ids) + np.cumsum(lengths) - lengths
            first = len(self.index)
            self.index.update(zip(new, range(first, first + len(new)), strict=True))
            self.ids = np.concatenate([self.ids, ids])
            self.starts = np.concatenate([self.starts, starts])
            self.lengths = np.concatenate([self.lengths, lengths])
        return np.fromiter(map(self.index.__getitem__, pieces), dtype=np.int64, count=len(pieces))

    def gather(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ids of the pieces `codes`, one after another, and where each piece's ids end."""
        lengths = self.lengths[codes]
        ends = np.cumsum(lengths)
        offsets = np.repeat(self.starts[codes] - (ends - lengths), lengths)
        return self.ids[np.arange(len(offsets)) + offsets], ends


def fits(tok: HfTokenizer) -> bool:
    """Whether `tok` is tfm's pipeline (`tokenizer.untrained`) around a plain BPE model, the
    one whose pre-tokenizer `BulkEncoder` knows; any other tokenizer is left to `tokenizers`."""
    spec, ours = json.loads(tok.to_str()), json.loads(untrained().to_str())
    model = spec["model"]
    return (
        all(spec[part] == ours[part] for part in ("normalizer", "pre_tokenizer"))
        and model["type"] == "BPE"
        and not model.get("dropout")
        and all(added["special"] for added in spec["added_tokens"])  # tags, which it knows
        and spec["truncation"] is None
        and spec["padding"] is None
    )


def classify(tok: HfTokenizer, char: str) -> str:
    """How `tok`'s pre-tokenizer splits `char`: doubled, punctuation comes out as two pieces (the
    first with the space), a digit as one run after a lone space, a word character as one word;
    anything else (the space marker itself) is ALONE, and so is the newline that separates the
    texts of a chunk, whatever the pre-tokenizer makes of it."""
    if char == _NEWLINE:
        return ALONE
    pieces = [piece for piece, _ in tok.pre_tokenizer.pre_tokenize_str(char * 2)]
    kinds = {
        PUNCTUATION: [SPACE + char, char],
        DIGIT: [SPACE, char * 2],
        WORD: [SPACE + char * 2],
    }
    return next((kind for kind, split in kinds.items() if pieces == split), ALONE)


def needs_normalizing(texts: Sequence[str]) -> list[int]:
    """The indices of the texts that the normalizer would change: those not in NFC, or with
    whitespace other than single spaces between other characters. Python's whitespace includes
    the normalizer's, so every other text is one the normalizer leaves as it is."""
    joined = "\0".join(texts)  # NUL: neither whitespace nor composing with what follows
    at = [m.start() for m in _OTHER_SPACE.finditer(joined)]
    for pattern in ("  ", "\0 ", " \0"):  # two spaces; a space that starts or ends a text
        at += [found + pattern.index(" ") for found in _find_all(joined, pattern)]
    if joined.startswith(" "):
        at.append(0)
    if joined.endswith(" "):
        at.append(len(joined) - 1)
    changed = set(_texts_at(texts, at))
    if not unicodedata.is_normalized("NFC", joined):
        changed.update(i for i, t in enumerate(texts) if not unicodedata.is_normalized("NFC", t))
    return sorted(changed)


def _find_all(text: str, pattern: str) -> list[int]:
    found, at = [], text.find(pattern)
    while at >= 0:
        found.append(at)
        at = text.find(pattern, at + 1)
    return found


def _containing(texts: Sequence[str], pattern: re.Pattern[str]) -> list[int]:
    """The indices of the texts in which `pattern` matches, searched in all at once."""
    return _texts_at(texts, [m.start() for m in pattern.finditer("\0".join(texts))])


def _texts_at(texts: Sequence[str], at: list[int]) -> list[int]:
    """The indices of the texts that hold the positions `at` of the texts joined by one
    character."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    starts = np.cumsum(lengths + 1) - (lengths + 1)  # of each text in the joined string
    return sorted(set((np.searchsorted(starts, at, side="right") - 1).tolist()))


def characters(text: str) -> set[str]:
    """The distinct characters of `text`, counted as code points by numpy (twice as fast as
    `set(text)` on a chunk of a corpus)."""
    counts = np.bincount(np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32))
    return {chr(point) for point in np.flatnonzero(counts)}


def _flat(rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    flat = np.fromiter((i for row in rows for i in row), dtype=np.int64, count=int(lengths.sum()))
    return flat, lengths

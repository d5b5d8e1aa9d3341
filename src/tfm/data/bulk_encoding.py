"""Encoding millions of sentences for the data cache: the tokenizer's own ids, found faster.

Two shortcuts, neither of which changes an id:

- The BPE model remembers up to `WORD_CACHE` words' segmentations (`tokenizers` keeps 10,000):
  on a big corpus most words come back, and a word seen before skips its merges.
- The normalizer (`tfm.data.tokenizer`: NFC, each run of whitespace to one space, strip) is a
  fifth of the time, and most sentences are already what it makes of them. Those are encoded
  without it; the few it would change (`needs_normalizing`) with it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import models

WORD_CACHE = 200_000  # words whose segmentation BPE remembers while encoding (default 10,000)

# Every character but the space that Python counts as whitespace (str.isspace): Unicode's
# White_Space, which the normalizer's regex matches, and the separators U+001C to U+001F.
OTHER_SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_OTHER_SPACE = re.compile(f"[{re.escape(OTHER_SPACES)}]")


class BulkEncoder:
    """The ids of `tok.encode_batch_fast(texts, add_special_tokens=False)`, for many texts."""

    def __init__(self, tok: HfTokenizer) -> None:
        self.full = _remembering(tok)
        self.plain = _remembering(tok)
        self.plain.normalizer = None

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's ids, in order."""
        texts = list(texts)
        found = self.plain.encode_batch_fast(texts, add_special_tokens=False)
        ids: list[list[int]] = [e.ids for e in found]
        changed = needs_normalizing(texts)
        if changed:
            redone = self.full.encode_batch_fast(
                [texts[i] for i in changed], add_special_tokens=False
            )
            for i, encoding in zip(changed, redone, strict=True):
                ids[i] = encoding.ids
        return ids


def needs_normalizing(texts: Sequence[str]) -> list[int]:
    """The indices of the texts that the normalizer would change: those not in NFC, or with
    whitespace other than single spaces between other characters. Python's whitespace includes
    the normalizer's, so every other text is one the normalizer leaves as it is. The texts are
    searched joined with NUL, which neither is whitespace nor composes with what follows."""
    joined = "\0".join(texts)
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]])  # of each text in `joined`
    spaces = [m.start() for m in _OTHER_SPACE.finditer(joined)]
    for pattern in ("  ", "\0 ", " \0"):  # two spaces; a space that starts or ends a text
        spaces += [at + pattern.index(" ") for at in _find_all(joined, pattern)]
    if joined.startswith(" "):
        spaces.append(0)
    if joined.endswith(" "):
        spaces.append(len(joined) - 1)
    changed = set((np.searchsorted(starts, spaces, side="right") - 1).tolist())
    if not unicodedata.is_normalized("NFC", joined):
        changed.update(i for i, t in enumerate(texts) if not unicodedata.is_normalized("NFC", t))
    return sorted(changed)


def _find_all(text: str, pattern: str) -> list[int]:
    found, at = [], text.find(pattern)
    while at >= 0:
        found.append(at)
        at = text.find(pattern, at + 1)
    return found


def _remembering(tok: HfTokenizer) -> HfTokenizer:
    """A copy of `tok` whose BPE remembers `WORD_CACHE` words."""
    text = tok.to_str()
    copy, spec = HfTokenizer.from_str(text), json.loads(text)["model"]
    copy.model = models.BPE(
        vocab=spec["vocab"],
        merges=[_merge(m) for m in spec["merges"]],
        unk_token=spec["unk_token"],
        fuse_unk=spec["fuse_unk"],
        byte_fallback=spec["byte_fallback"],
        ignore_merges=spec["ignore_merges"],
        cache_capacity=WORD_CACHE,
    )
    return copy


def _merge(merge: str | list[str]) -> tuple[str, str]:
    """A merge as `tokenizers` writes it ("a b", or ["a", "b"] since 0.20) as a pair."""
    left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
    return left, right

"""BPE-dropout (Provilkov et al., 2020): a new random segmentation of the training text each epoch.

Plain BPE segments a word the same way every time ("▁Fahrrad" is always one piece), so the model
never sees how a word is built from smaller pieces. BPE-dropout applies the same merges, but every
candidate merge is skipped with probability p at each step: a word comes out in smaller pieces
some of the time ("▁Fahr" "rad", "▁F" "ahr" "rad"), always from the same vocabulary. The paper
reports +1 to +2 BLEU on small corpora with larger models trained longer; on Multi30k en→de the
2.3M-parameter tiny recipe learned far more slowly with it (bench/README.md). Only training uses
it; validation, test, translation and the saved tokenizer segment deterministically (p = 0).

Algorithm, per pre-tokenized word (as in the paper and in `tokenizers`' BPE with dropout): start
from its characters; at each step, go through the adjacent pairs that have a merge, lowest merge
rank first (leftmost first among equal ones), skip each with probability p, and apply the first
one not skipped; stop when every candidate was skipped or none is left. With p = 0 this is plain
BPE, the same ids as `tokenizers` gives (tested).

Ours rather than `tokenizers`' own `BPE(dropout=p)`: that one draws from an unseeded generator,
so an epoch's segmentation could not be drawn again when a run resumes inside it. Here epoch e of
a run with seed s always gets the same segmentation.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from tokenizers import Tokenizer as HfTokenizer

from tfm.data.batching import Pairs
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import BOS_ID, EOS_ID, UNK_ID, Tokenizer


class DropoutSegmenter:
    """Seeded BPE-dropout over one side's trained `tokenizers` BPE (its normalizer and
    pre-tokenizer included). `words(texts)` pre-tokenizes once; `encode(words, p, rng)` then gives
    subword ids per sentence, without BOS/EOS, as often as needed."""

    def __init__(self, tok: HfTokenizer) -> None:
        spec = json.loads(tok.to_str())["model"]
        self._vocab: dict[str, int] = spec["vocab"]
        self._ranks: dict[tuple[str, str], int] = {}
        for rank, merge in enumerate(spec["merges"]):
            left, right = merge.split(" ") if isinstance(merge, str) else merge
            self._ranks[(left, right)] = rank
        self._normalizer, self._pre_tokenizer = tok.normalizer, tok.pre_tokenizer

    def words(self, texts: Sequence[str]) -> list[list[str]]:
        """Each sentence normalized and pre-tokenized: its words, as BPE sees them."""
        split, normalize = self._pre_tokenizer.pre_tokenize_str, self._normalizer.normalize_str
        return [[word for word, _ in split(normalize(text))] for text in texts]

    def encode(
        self, sentences: Sequence[Sequence[str]], p: float, rng: random.Random
    ) -> list[list[int]]:
        """Subword ids per sentence of `words(...)`; every merge is skipped with probability p."""
        if not 0.0 <= p < 1.0:
            raise ValueError(f"BPE-dropout p={p} is not in [0, 1)")
        vocab, segment, draw = self._vocab, self._segment, rng.random
        result = []
        for words in sentences:
            ids: list[int] = []
            for word in words:
                for piece in segment(word, p, draw):
                    token = vocab.get(piece, UNK_ID)
                    if token != UNK_ID or not ids or ids[-1] != UNK_ID:  # a run of <unk>: one
                        ids.append(token)
            result.append(ids)
        return result

    def _segment(self, word: str, p: float, draw) -> list[str]:
        pieces, rank_of = list(word), self._ranks.get
        while len(pieces) > 1:
            # The lowest-ranked pair not skipped, leftmost among equals. A pair ranked at or above
            # one already kept cannot win, so it needs no draw: the outcome is distributed as if
            # every candidate had drawn.
            best, at = None, -1
            for i in range(len(pieces) - 1):
                rank = rank_of((pieces[i], pieces[i + 1]))
                if rank is not None and (best is None or rank < best) and draw() >= p:
                    best, at = rank, i
            if best is None:
                break  # no merge left, or every one was skipped this step
            pieces[at : at + 2] = [pieces[at] + pieces[at + 1]]
        return pieces


class BpeDropout:
    """The epoch transform (`tfm.data.epochs`) that re-segments the training split with
    BPE-dropout in every epoch.

    A pure function of (seed, epoch), so a resumed run gets the same segmentation for the epoch it
    resumes in. It re-segments `split`'s text and must come first among the transforms: the pairs
    it is given are the split's plain segmentation. A pair stays the one the split kept: if its
    new segmentation is longer than `max_length` or `max_tokens` allow, the pair keeps its plain
    segmentation for that epoch, so nothing is dropped or batched alone because of dropout.
    """

    def __init__(
        self,
        split: EncodedSplit,
        tokenizer: Tokenizer,
        *,
        p: float,
        seed: int,
        max_tokens: int,
        max_length: int | None = None,
        sides: str = "both",
    ) -> None:
        if not 0.0 < p < 1.0:
            raise ValueError(f"BPE-dropout p={p} is not in (0, 1)")
        if sides not in ("both", "source", "target"):
            raise ValueError(f"sides={sides!r} is not one of both, source, target")
        self.p, self.seed, self.max_tokens = p, seed, max_tokens
        self.max_length, self.sides = max_length, sides
        src_model, tgt_model = tokenizer.bpe_models
        self._src = DropoutSegmenter(src_model)
        self._tgt = self._src if tgt_model is src_model else DropoutSegmenter(tgt_model)
        # None: that side keeps its plain segmentation
        self._src_words = self._src.words(split.src_text) if sides != "target" else None
        self._tgt_words = self._tgt.words(split.tgt_text) if sides != "source" else None
        self._n_pairs = len(split)

    def active(self, epoch: int) -> bool:
        return True

    def __call__(self, pairs: Pairs, epoch: int) -> Pairs:
        """`pairs` (the split's plain segmentation) segmented anew for `epoch`."""
        if len(pairs.src) != self._n_pairs:
            raise ValueError(
                f"BPE-dropout re-segments the {self._n_pairs} training pairs, got "
                f"{len(pairs.src)}: it must be the first epoch transform"
            )
        rng = random.Random(f"tfm-bpe-dropout:{self.seed}:{epoch}")
        src, tgt = list(pairs.src), list(pairs.tgt)
        if self._src_words is not None:
            src = [[*ids, EOS_ID] for ids in self._src.encode(self._src_words, self.p, rng)]
        if self._tgt_words is not None:
            tgt = [[BOS_ID, *ids, EOS_ID] for ids in self._tgt.encode(self._tgt_words, self.p, rng)]
        for i, (s, t) in enumerate(zip(src, tgt, strict=True)):
            # max_length counts subwords without framing (src + EOS, BOS + tgt + EOS); max_tokens,
            # framed widths
            too_long = self.max_length is not None and max(len(s) - 1, len(t) - 2) > self.max_length
            if too_long or max(len(s), len(t)) > self.max_tokens:
                src[i], tgt[i] = pairs.src[i], pairs.tgt[i]
        return Pairs(src=src, tgt=tgt)

    def describe(self, before: Pairs, after: Pairs, epoch: int) -> str:
        plain = sum(map(len, before.src)) + sum(map(len, before.tgt))
        dropped = sum(map(len, after.src)) + sum(map(len, after.tgt))
        return (
            f"BPE-dropout {self.p:.2g} ({self.sides}): {dropped} tokens, "
            f"{100 * (dropped / plain - 1):+.1f}% over plain BPE"
        )

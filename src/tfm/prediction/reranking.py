"""Reranking the beam's hypotheses with a model that translates the other way (not in the paper).

Beam search ranks each hypothesis y of a source x by the forward model's length-normalised
log p(y | x) alone. A model trained in the reverse direction asks the other question, how well y
explains x: log p(x | y) is low for a hypothesis that drops or invents content, which the forward
model's fluency-minded score tends to forgive. This is the "channel model" of noisy-channel
reranking (Yee et al., 2019, "Simple and Effective Noisy Channel Modeling for Neural Machine
Translation", who also add a language model; tfm has none). Each hypothesis is scored

    forward score + weight · log p(x | y) / |x|

with |x| the source's tokens (EOS included) in the reverse model's vocabulary: a per-token
log-probability, on about the scale of the forward score, so that one weight suits short and long
sentences alike. Weight 0 keeps the beam's order. Choose the weight on the validation split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tfm.data.tokenizer import BOS_ID, EOS_ID, Tokenizer
from tfm.prediction.ensemble import Model
from tfm.prediction.likelihood import sequence_log_probs
from tfm.prediction.settings import DecodeSettings

Scored = list[tuple[str, float]]  # one sentence's hypotheses (text, score), best first


@dataclass(frozen=True)
class Reranker:
    """A reverse-direction model (or ensemble) that reads our target language as its source,
    with its tokenizer, its decoding device and precision, and the channel score's weight."""

    model: Model
    tokenizer: Tokenizer
    settings: DecodeSettings
    weight: float = 1.0

    def channel_scores(self, sources: Sequence[str], hypotheses: Sequence[str]) -> list[float]:
        """log p(source | hypothesis) / |source| for each aligned pair of texts."""
        if len(sources) != len(hypotheses):
            raise ValueError(f"{len(sources)} sources but {len(hypotheses)} hypotheses")
        if not sources:
            return []
        # The reverse model's source side is our target language, its target side our source.
        framed_hyps = [ids + [EOS_ID] for ids in self.tokenizer.encode_src(list(hypotheses))]
        framed_srcs = [[BOS_ID, *ids, EOS_ID] for ids in self.tokenizer.encode_tgt(list(sources))]
        log_probs = sequence_log_probs(self.model, framed_hyps, framed_srcs, self.settings)
        # |x| = the source's ids and EOS: the positions summed over (BOS is given, not predicted)
        return [lp / (len(x) - 1) for lp, x in zip(log_probs, framed_srcs, strict=True)]

    def rerank(self, sources: Sequence[str], nbest: Sequence[Scored]) -> list[Scored]:
        """Each source's hypotheses re-sorted by forward score + weight · channel score, best
        first, with that combined score; a blank source's hypotheses are left as they are."""
        return self.combine(nbest, self.channel_of(sources, nbest))

    def channel_of(self, sources: Sequence[str], nbest: Sequence[Scored]) -> list[list[float]]:
        """The channel score of each hypothesis in each source's n-best list, in the list's
        order; none for a blank source (there is nothing to explain)."""
        if len(sources) != len(nbest):
            raise ValueError(f"{len(sources)} sources but {len(nbest)} n-best lists")
        pairs = [
            (source.strip(), text)
            for source, found in zip(sources, nbest, strict=True)
            if source.strip()
            for text, _ in found
        ]
        channel = iter(self.channel_scores([x for x, _ in pairs], [y for _, y in pairs]))
        return [
            [next(channel) for _ in found] if source.strip() else []
            for source, found in zip(sources, nbest, strict=True)
        ]

    def combine(self, nbest: Sequence[Scored], channel: Sequence[Sequence[float]]) -> list[Scored]:
        """`nbest` re-sorted by forward score + weight · `channel` (from `channel_of`), so that
        several weights can be tried on one set of channel scores; a list with no channel
        scores (a blank source) is left as it is."""
        result = []
        for found, scores in zip(nbest, channel, strict=True):
            if not scores:
                result.append(list(found))
                continue
            combined = [
                (text, score + self.weight * c)
                for (text, score), c in zip(found, scores, strict=True)
            ]
            result.append(sorted(combined, key=lambda pair: -pair[1]))  # stable: ties keep order
        return result

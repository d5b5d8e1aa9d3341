"""A torch model as a `Translator`: tfm's own search (`tfm.prediction.translate`) over one model
or an ensemble, with a reranker of the beam if any. A trained run opened by
`tfm.prediction.opening`, or a model being trained, which validation decodes with."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tfm.config import Config
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import BOS_ID, EOS_ID, Tokenizer
from tfm.prediction.attention_weights import AttentionView, attention_views
from tfm.prediction.ensemble import Model
from tfm.prediction.likelihood import mean_log_probs, teacher_forced_nll
from tfm.prediction.reranking import Reranker
from tfm.prediction.settings import DecodeSettings
from tfm.prediction.translate import search_ids
from tfm.prediction.translator import Found, Scored, Translator
from tfm.transformer import Transformer


class TorchTranslator(Translator):
    """A torch model translating with tfm's own search: `model` is what decodes (one model, or
    an ensemble), `reranker` the reverse-direction model that reranks the whole beam, if any;
    `run` the run directory it came from (None: a model being trained) and `model_file` the file
    of its weights; `ensemble`, `rerank_with` the other runs as the user named them, for
    `describe`."""

    engine = "torch"

    def __init__(
        self,
        *,
        model: Model,
        tokenizer: Tokenizer,
        config: Config,
        settings: DecodeSettings,
        reranker: Reranker | None = None,
        step: int | None = None,
        run: Path | None = None,
        ensemble: Sequence[str | Path] = (),
        rerank_with: Sequence[str | Path] = (),
        model_file: Path | None = None,
    ) -> None:
        self.model, self.tokenizer, self.config, self.settings = model, tokenizer, config, settings
        self.reranker, self.step, self.run, self.model_file = reranker, step, run, model_file
        self.ensemble, self.rerank_with = tuple(ensemble), tuple(rerank_with)
        self.shows_attention = isinstance(model, Transformer)  # an ensemble's do not combine

    def search(
        self,
        sources: list[list[int]],
        settings: DecodeSettings,
        numbers: list[int],
        *,
        n_best: int,
        scored: bool,
    ) -> Sequence[Found]:
        return search_ids(self.model, sources, settings, n_best=n_best, numbers=numbers)

    def best_of(
        self,
        texts: Sequence[str],
        sources: list[list[int]],
        settings: DecodeSettings,
        numbers: list[int],
    ) -> list[str]:
        """As `Translator.best_of`; with a reranker, the beam's best after reranking."""
        if self.reranker is None:
            return super().best_of(texts, sources, settings, numbers)
        return [found[0][0] for found in self.ranked_beams(texts, sources, settings, numbers)]

    def rank(self, texts: Sequence[str], beams: list[Scored]) -> list[Scored]:
        """The beams reranked, with the combined scores, when there is a reranker."""
        return beams if self.reranker is None else self.reranker.rerank(texts, beams)

    def log_probs(self, sources: list[list[int]], outputs: Sequence[list[int]]) -> list[float]:
        targets = [[BOS_ID, *ids, EOS_ID] for ids in outputs]
        return mean_log_probs(self.model, sources, targets, self.settings)

    def nll(self, split: EncodedSplit) -> tuple[float, int] | None:
        return teacher_forced_nll(self.model, split, self.settings)

    def attention_views(
        self, sentence: str, source: list[int] | None = None
    ) -> dict[str, AttentionView]:
        """`sentence` translated greedily and its attention weights of every kind (see
        `tfm.prediction.attention_weights`); a model of one run only."""
        if not isinstance(self.model, Transformer):
            return super().attention_views(sentence, source)
        return attention_views(self.model, self.tokenizer, sentence, limit=self.settings.limit,
                               source=source, tag=self.settings.tag)  # fmt: skip

    def describe(self) -> dict[str, object]:
        """The run and its step; the ensemble's other runs, the reranking runs and weight."""
        found: dict[str, object] = {"run": None if self.run is None else str(self.run),
                                    "step": self.step}  # fmt: skip
        if self.ensemble:
            found["ensemble"] = [str(Path(other)) for other in self.ensemble]
        if self.reranker is not None:
            found["rerank_with"] = [str(Path(other)) for other in self.rerank_with]
            found["rerank_weight"] = self.reranker.weight
        return found

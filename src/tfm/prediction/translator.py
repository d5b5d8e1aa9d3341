"""The one decoding surface: a `Translator` turns lines into translations, whichever engine runs
the search (`tfm.commands.engines.open_translator` opens what the user named as one).

A trained run translates with tfm's own search in PyTorch (`tfm.prediction.opening`: with an
ensemble and a reranker if asked for, or a model being trained, for validation); a folder written
by `tfm export` translates with CTranslate2 (`tfm.deploy.ct2_translator`). Both give the same
lines, n-best lists and scores, and every command, the server and validation take a Translator
without asking which it is. What is written here once: a blank line gives an empty translation,
the other lines are encoded and framed (ids + EOS) and numbered (for the warnings that name
lines), an n-best list holds distinct texts, and a translation's confidence is the figure of the
ids the search found for it, read through the map fitted for the model
(`tfm.prediction.confidence`). An engine supplies only `search` over framed sources, says
whether it can show attention weights (`shows_attention`), and scores given outputs
(`log_probs`) where it can.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from tfm.config import Config
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import EOS_ID, Tokenizer
from tfm.errors import UsageError
from tfm.prediction.confidence import ConfidenceMap, read_figures
from tfm.prediction.settings import DecodeSettings

if TYPE_CHECKING:
    from tfm.prediction.attention_weights import AttentionView

Scored = list[tuple[str, float]]  # one sentence's translations and scores, best first
Found = Sequence[tuple[list[int], float]]  # one source's hypotheses: ids (no BOS, EOS), score


class Rating(NamedTuple):
    """One translation with the strategy's score, its figure (the mean log-probability per token
    of the ids found) and its confidence; None where they were not read."""

    translation: str
    score: float
    log_prob: float | None
    confidence: float | None


class Translator(ABC):
    """Lines in, translations out. `settings` were resolved once, when it was opened; a call
    may pass others (`settings.asking(...)`, `dataclasses.replace`): strategy, output limits and
    batch size change per call, the device does not. `engine` is "torch" or "ctranslate2";
    `step` the training step of the model, where known."""

    config: Config  # the run's resolved config
    tokenizer: Tokenizer
    settings: DecodeSettings
    engine: str
    step: int | None
    shows_attention: bool = False  # whether `attention_views` can show the attention weights
    confidence_map: ConfidenceMap | None = None  # the run's map, fitted for this model
    tgt_langs: tuple[str, ...] | None = None  # the languages its training read (None: unknown)
    unmapped = "this translator has no confidence map"  # why `confidence_map` is None

    @abstractmethod
    def search(
        self,
        sources: list[list[int]],
        settings: DecodeSettings,
        numbers: list[int],
        *,
        n_best: int,
        scored: bool,
    ) -> Sequence[Found]:
        """Per framed source (`numbers`: their line numbers, for warnings), the
        `settings.strategy.hypotheses(n_best)` hypotheses it finds, best first; a score may be
        NaN unless `scored`."""

    def rank(self, texts: Sequence[str], beams: list[Scored]) -> list[Scored]:
        """Each non-blank text's translations re-sorted (a reranker); as they are by default."""
        return beams

    def translate(
        self, texts: Sequence[str], *, first_line: int = 1, settings: DecodeSettings | None = None
    ) -> list[str]:
        """One translation per text, in order; a blank text gives an empty one. `first_line`:
        the line number of texts[0], which warnings about a line name; `settings`: these
        instead of the translator's own."""
        settings = settings or self.settings
        todo, sources = framed_nonblank(self.tokenizer, texts, tag=settings.tag)
        found = self.best_of([texts[i] for i in todo], sources, settings,
                             [first_line + i for i in todo])  # fmt: skip
        return placed(len(texts), todo, found, str)

    def nbest(
        self,
        texts: Sequence[str],
        n_best: int,
        *,
        first_line: int = 1,
        settings: DecodeSettings | None = None,
    ) -> list[Scored]:
        """The `n_best` best distinct translations of each text with their scores, best first:
        hypotheses whose subwords differ but whose texts are the same count once, and the list
        fills up from the rest of the beam (so it is shorter only when the whole beam holds fewer
        distinct texts). A blank text gives one empty translation scored 0. UsageError when the
        strategy cannot find `n_best`."""
        found = self.rated(texts, n_best, first_line=first_line, settings=settings, read=False)
        return [[(rating.translation, rating.score) for rating in rated] for rated in found]

    def rated(
        self,
        texts: Sequence[str],
        n_best: int = 1,
        *,
        first_line: int = 1,
        settings: DecodeSettings | None = None,
        read: bool = True,
    ) -> list[list[Rating]]:
        """`nbest`, each translation with its figure and confidence where `read` and the map
        reads translations found with `settings` (`rated_beams`); a blank text gives one empty
        translation scored 0, without either."""
        settings = settings or self.settings
        if n_best < 1:
            raise UsageError(f"n_best={n_best}: expected 1 or more")
        settings.strategy.hypotheses(n_best)
        todo, sources = framed_nonblank(self.tokenizer, texts, tag=settings.tag)
        found = self.rated_beams([texts[i] for i in todo], sources, settings,
                                 [first_line + i for i in todo], n_best, read=read)  # fmt: skip
        return placed(len(texts), todo, found, empty_output)

    def translate_split(self, split: EncodedSplit, *, first_line: int = 1) -> list[str]:
        """The translation of each source of an encoded split (as `tfm eval` and validation
        decode one)."""
        numbers = list(range(first_line, first_line + len(split.src)))
        return self.best_of(split.src_text, split.src, self.settings, numbers)

    def best_of(
        self,
        texts: Sequence[str],
        sources: list[list[int]],
        settings: DecodeSettings,
        numbers: list[int],
    ) -> list[str]:
        """The best translation of each framed source (`texts`: the sources as text)."""
        found = self.search(sources, settings, numbers, n_best=1, scored=False)
        return self.tokenizer.decode_tgt([hypotheses[0][0] for hypotheses in found])

    def ranked_beams(
        self,
        texts: Sequence[str],
        sources: list[list[int]],
        settings: DecodeSettings,
        numbers: list[int],
        n_best: int = 1,
    ) -> list[Scored]:
        """The distinct translations among the hypotheses of each framed source, ranked
        (`rank`)."""
        found = self.ranked_found(texts, sources, settings, numbers, n_best)
        return [[(text, score) for text, score, _ in ranked] for ranked in found]

    def ranked_found(
        self,
        texts: Sequence[str],
        sources: list[list[int]],
        settings: DecodeSettings,
        numbers: list[int],
        n_best: int = 1,
    ) -> list[list[tuple[str, float, list[int]]]]:
        """`ranked_beams`, each translation with the ids the search found for it (the best
        hypothesis that reads as that text)."""
        beams = self.search(sources, settings, numbers, n_best=n_best, scored=True)
        decoded = iter(self.tokenizer.decode_tgt([ids for beam in beams for ids, _ in beam]))
        firsts: list[dict[str, tuple[float, list[int]]]] = []
        for beam in beams:
            first: dict[str, tuple[float, list[int]]] = {}
            for ids, score in beam:
                first.setdefault(next(decoded), (score, ids))
            firsts.append(first)
        ranked = self.rank(
            texts, [[(text, score) for text, (score, _) in f.items()] for f in firsts]
        )
        return [[(text, score, first[text][1]) for text, score in scored]
                for scored, first in zip(ranked, firsts, strict=True)]  # fmt: skip

    def rated_beams(
        self,
        texts: Sequence[str],
        sources: list[list[int]],
        settings: DecodeSettings,
        numbers: list[int],
        n_best: int = 1,
        *,
        read: bool = True,
    ) -> list[list[Rating]]:
        """The `n_best` best of `ranked_found` of each framed source, each with its figure and
        confidence (`tfm.prediction.confidence`): where `read` and the map reads translations
        found with `settings`, the mean log-probability per token of the ids found (`log_probs`)
        and the map's reading of it; else None for both."""
        found = [ranked[:n_best] for ranked in
                 self.ranked_found(texts, sources, settings, numbers, n_best)]  # fmt: skip
        reading = self.reading_map(settings) if read else None
        figures = None
        if reading is not None:
            framed = [source for source, ranked in zip(sources, found, strict=True) for _ in ranked]
            figures = self.log_probs(framed, [ids for ranked in found for *_, ids in ranked])
        none: list[float | None] = [None] * sum(map(len, found))
        figure = iter(figures or none)
        return [[Rating(text, score, *_read(reading, next(figure))) for text, score, _ in ranked]
                for ranked in found]  # fmt: skip

    def log_probs(
        self, sources: list[list[int]], outputs: Sequence[list[int]]
    ) -> list[float] | None:
        """The mean log-probability per token of each output (ids without BOS and EOS; its </s>
        counted) given its framed source: the figure a confidence is read from. None where the
        engine cannot score given outputs."""
        return None

    def reading_map(self, settings: DecodeSettings | None = None) -> ConfidenceMap | None:
        """The confidence map, where it reads translations found with `settings` (default: the
        translator's); else None (`no_confidence` says why)."""
        found, strategy = self.confidence_map, (settings or self.settings).strategy.name
        return found if found is not None and found.reads(strategy) else None

    def no_confidence(self, settings: DecodeSettings | None = None) -> str | None:
        """Why translations found with `settings` (default: the translator's) have no
        confidence; None when they have one."""
        if self.confidence_map is None:
            return self.unmapped
        strategy = (settings or self.settings).strategy.name
        if not self.confidence_map.reads(strategy):
            return (f"the confidence map reads the translations of {self.confidence_map.strategy} "
                    f"search, not those {strategy} finds")  # fmt: skip
        return None

    def nll(self, split: EncodedSplit) -> tuple[float, int] | None:
        """The summed negative log-likelihood of a split's targets and its token count, or None
        where the engine cannot score (`tfm.prediction.likelihood.teacher_forced_nll`)."""
        return None

    def attention_views(
        self, sentence: str, source: list[int] | None = None
    ) -> dict[str, AttentionView]:
        """`sentence` translated and the attention weights of every layer and head, by kind
        (`tfm.prediction.attention_weights`; `source`: its ids as already encoded, with </s>);
        UsageError where `shows_attention` is False."""
        raise UsageError(
            f"attention weights need one model of a tfm run; this {self.engine} translator "
            "has none to show"
        )

    def describe(self) -> dict[str, object]:
        """What decodes, for a report (`tfm eval --json`): the run, and what else the engine
        tells about it."""
        return {}


def framed_nonblank(
    tokenizer: Tokenizer, texts: Sequence[str], *, tag: str | None = None
) -> tuple[list[int], list[list[int]]]:
    """The indices of the non-blank texts, and those texts encoded (after `tag`, the target
    language's in a model trained into several) and framed (ids + EOS)."""
    todo = [i for i, t in enumerate(texts) if t.strip()]
    encoded = tokenizer.encode_src([texts[i].strip() for i in todo], tag=tag)
    return todo, [ids + [EOS_ID] for ids in encoded]


def _read(reading: ConfidenceMap | None, figure: float | None) -> tuple[float | None, ...]:
    """A figure and the confidence `reading` reads off it (None without either)."""
    return figure, read_figures(reading, [figure])[0]


def empty_output() -> list[Rating]:
    """A blank sentence's n-best list: the empty output, certain, with no figure to read."""
    return [Rating("", 0.0, None, None)]


def placed(count: int, todo: list[int], found: Sequence, blank: Callable[[], object]) -> list:
    """`count` results: `found` at the indices `todo`, a new `blank()` elsewhere."""
    result = [blank() for _ in range(count)]
    for i, value in zip(todo, found, strict=True):
        result[i] = value
    return result

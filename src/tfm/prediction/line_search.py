"""What both decoding engines share: lines in, translations out.

A blank line gives an empty translation, the other lines are encoded and framed (ids + EOS) and
numbered (for the warnings that name lines), and an n-best list holds distinct texts; all of it is
written here once. An engine (`tfm.prediction.opening` for a trained run,
`tfm.deploy.ct2_translator` for a CTranslate2 export) supplies only the search over framed sources.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from tfm.config import Config
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import EOS_ID, Tokenizer
from tfm.errors import UsageError
from tfm.prediction.settings import DecodeSettings

Scored = list[tuple[str, float]]  # one sentence's translations and scores, best first
Found = Sequence[tuple[list[int], float]]  # one source's hypotheses: ids (no BOS, EOS), score


class LineTranslator(ABC):
    """A `tfm.prediction.translator.Translator` over an engine's search: `translate` and
    `nbest` of lines; subclasses give `search_best` and `search_beam` (and may `rank`)."""

    config: Config
    tokenizer: Tokenizer
    settings: DecodeSettings
    engine: str
    step: int | None

    @abstractmethod
    def search_best(
        self, sources: list[list[int]], settings: DecodeSettings, numbers: list[int]
    ) -> list[list[int]]:
        """The best output ids of each framed source, in input order; `numbers` are the
        sources' line numbers, for warnings."""

    @abstractmethod
    def search_beam(
        self, sources: list[list[int]], settings: DecodeSettings, numbers: list[int]
    ) -> Sequence[Found]:
        """The whole beam (`settings.beam_size` hypotheses) of each framed source, best first."""

    def rank(self, texts: Sequence[str], beams: list[Scored]) -> list[Scored]:
        """Each non-blank text's translations re-sorted (a reranker); as they are by default."""
        return beams

    def translate(
        self, texts: Sequence[str], *, first_line: int = 1, settings: DecodeSettings | None = None
    ) -> list[str]:
        """One translation per text, in order; a blank text gives an empty one. `first_line`:
        the line number of texts[0]; `settings`: these instead of the translator's own (the
        device stays the one the translator was opened on)."""
        todo, sources = framed_nonblank(self.tokenizer, texts)
        found = self.best_of([texts[i] for i in todo], sources, settings or self.settings,
                             [first_line + i for i in todo])  # fmt: skip
        return _placed(len(texts), todo, found, str)

    def nbest(
        self,
        texts: Sequence[str],
        n_best: int,
        *,
        first_line: int = 1,
        settings: DecodeSettings | None = None,
    ) -> list[list[tuple[str, float]]]:
        """The `n_best` best distinct translations of each text with their scores, best first:
        hypotheses whose subwords differ but whose texts are the same count once, and the list
        fills up from the rest of the beam (so it is shorter only when the whole beam holds fewer
        distinct texts). A blank text gives one empty translation scored 0."""
        settings = settings or self.settings
        if not 1 <= n_best <= settings.beam_size:
            raise UsageError(f"n_best={n_best} needs a beam of {n_best} or more, not "
                             f"{settings.beam_size}")  # fmt: skip
        todo, sources = framed_nonblank(self.tokenizer, texts)
        ranked = self.ranked_beams([texts[i] for i in todo], sources, settings,
                                   [first_line + i for i in todo])  # fmt: skip
        return _placed(len(texts), todo, [found[:n_best] for found in ranked], _empty)

    def translate_split(self, split: EncodedSplit, *, first_line: int = 1) -> list[str]:
        """The translation of each source of an encoded split (as `tfm eval` decodes one)."""
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
        return self.tokenizer.decode_tgt(self.search_best(sources, settings, numbers))

    def ranked_beams(
        self,
        texts: Sequence[str],
        sources: list[list[int]],
        settings: DecodeSettings,
        numbers: list[int],
    ) -> list[Scored]:
        """The distinct translations in the whole beam of each framed source, ranked (`rank`)."""
        beams = self.search_beam(sources, settings, numbers)
        decoded = iter(self.tokenizer.decode_tgt([ids for beam in beams for ids, _ in beam]))
        return self.rank(texts, [distinct([(next(decoded), s) for _, s in beam]) for beam in beams])

    def nll(self, split: EncodedSplit) -> tuple[float, int] | None:
        """The summed negative log-likelihood of a split's targets and its token count, or None
        where the engine cannot score (`tfm.prediction.likelihood.teacher_forced_nll`)."""
        return None

    def describe(self) -> dict[str, object]:
        """What decodes, for a report: the run, and what else the engine tells about it."""
        return {}


def framed_nonblank(
    tokenizer: Tokenizer, texts: Sequence[str]
) -> tuple[list[int], list[list[int]]]:
    """The indices of the non-blank texts, and those texts encoded and framed (ids + EOS)."""
    todo = [i for i, t in enumerate(texts) if t.strip()]
    encoded = tokenizer.encode_src([texts[i].strip() for i in todo])
    return todo, [ids + [EOS_ID] for ids in encoded]


def distinct(scored: Scored) -> Scored:
    """The first (best) of each text, in order."""
    first: dict[str, float] = {}
    for text, score in scored:
        first.setdefault(text, score)
    return list(first.items())


def _empty() -> Scored:
    return [("", 0.0)]  # the empty output is certain


def _placed(count: int, todo: list[int], found: Sequence, blank: Callable[[], object]) -> list:
    """`count` results: `found` at the indices `todo`, a new `blank()` elsewhere."""
    result = [blank() for _ in range(count)]
    for i, value in zip(todo, found, strict=True):
        result[i] = value
    return result

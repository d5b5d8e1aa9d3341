"""The one decoding surface: a `Translator` turns lines into translations, whichever engine runs
the search (`tfm.commands.engines.open_translator` opens what the user named as one).

A trained run translates with tfm's own search in PyTorch (`tfm.prediction.opening`: with an
ensemble and a reranker if asked for); a folder written by `tfm export` translates with
CTranslate2 (`tfm.deploy.ct2_translator`). Both give the same lines, n-best lists and scores, and
`tfm translate`, `tfm eval` and the server take a Translator without asking which it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tfm.config import Config
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import Tokenizer
from tfm.prediction.settings import DecodeSettings


class Translator(Protocol):
    """Lines in, translations out. `settings` were resolved once, when it was opened; a call
    may pass others (`dataclasses.replace(translator.settings, beam_size=...)`): beam size,
    length penalty, output limits and batch size change per call, the device does not."""

    config: Config  # the run's resolved config
    tokenizer: Tokenizer
    settings: DecodeSettings
    engine: str  # "torch" or "ctranslate2"
    step: int | None  # the training step of the model, where known

    def translate(
        self, texts: Sequence[str], *, first_line: int = 1, settings: DecodeSettings | None = None
    ) -> list[str]:
        """One translation per text, in order; a blank text gives an empty one. `first_line`
        is the line number of texts[0], which warnings about a line name."""
        ...

    def nbest(
        self,
        texts: Sequence[str],
        n_best: int,
        *,
        first_line: int = 1,
        settings: DecodeSettings | None = None,
    ) -> list[list[tuple[str, float]]]:
        """Up to `n_best` (<= the beam size) distinct translations of each text with their
        scores, best first; a blank text gives [("", 0.0)]."""
        ...

    def translate_split(self, split: EncodedSplit, *, first_line: int = 1) -> list[str]:
        """The translation of each source of an encoded split."""
        ...

    def nll(self, split: EncodedSplit) -> tuple[float, int] | None:
        """The summed negative log-likelihood of a split's targets and their token count; None
        where the engine cannot score."""
        ...

    def describe(self) -> dict[str, object]:
        """What decodes, for a report (`tfm eval --json`): the run, its step or its engine."""
        ...

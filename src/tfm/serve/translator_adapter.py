"""One `Translator` over a torch run or a CTranslate2 export, as the server decodes with it.

`open_translator(request, min_beam=)` opens `request.run` (a torch run, or a folder written by
`tfm export`); the result translates and lists n-best hypotheses with per-call decode settings
(`dataclasses.replace(translator.settings, beam_size=..., length_penalty=...)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch

from tfm.config import Config
from tfm.data.tokenizer import Tokenizer
from tfm.prediction.settings import DecodeRequest, DecodeSettings


class Translator(Protocol):
    """A model ready to translate, whatever runs it ("torch" or "ctranslate2")."""

    config: Config
    tokenizer: Tokenizer
    settings: DecodeSettings
    engine: str
    step: int | None

    def translate(
        self, texts: Sequence[str], *, first_line: int = 1, settings: DecodeSettings | None = None
    ) -> list[str]: ...

    def nbest(
        self,
        texts: Sequence[str],
        n_best: int,
        *,
        first_line: int = 1,
        settings: DecodeSettings | None = None,
    ) -> list[list[tuple[str, float]]]: ...


@dataclass
class TorchTranslator:
    """A torch run (`tfm.prediction.opening.Decoding`) as a `Translator`; `trained` is the
    loaded run, for the attention weights."""

    decoding: Any  # tfm.prediction.opening.Decoding
    engine: str = "torch"

    def __post_init__(self) -> None:
        self.trained = self.decoding.trained
        self.config: Config = self.trained.config
        self.tokenizer: Tokenizer = self.trained.tokenizer
        self.settings: DecodeSettings = self.decoding.settings
        self.step: int | None = self.trained.step

    def _with(self, settings: DecodeSettings | None) -> Any:
        return self.decoding if settings is None else replace(self.decoding, settings=settings)

    def translate(
        self, texts: Sequence[str], *, first_line: int = 1, settings: DecodeSettings | None = None
    ) -> list[str]:
        return self._with(settings).translate(texts, first_line=first_line)

    def nbest(
        self,
        texts: Sequence[str],
        n_best: int,
        *,
        first_line: int = 1,
        settings: DecodeSettings | None = None,
    ) -> list[list[tuple[str, float]]]:
        return self._with(settings).nbest(texts, n_best, first_line=first_line)


@dataclass
class ExportTranslator:
    """A CTranslate2 export (`tfm.deploy.ExportedModel`) as a `Translator`."""

    model: Any  # tfm.deploy.ExportedModel
    settings: DecodeSettings
    engine: str = "ctranslate2"
    step: int | None = None

    def __post_init__(self) -> None:
        self.config: Config = self.model.config
        self.tokenizer: Tokenizer = self.model.tokenizer

    def translate(
        self, texts: Sequence[str], *, first_line: int = 1, settings: DecodeSettings | None = None
    ) -> list[str]:
        return [found[0][0] for found in self.nbest(texts, 1, settings=settings)]

    def nbest(
        self,
        texts: Sequence[str],
        n_best: int,
        *,
        first_line: int = 1,
        settings: DecodeSettings | None = None,
    ) -> list[list[tuple[str, float]]]:
        from tfm.deploy import SearchSettings, translate_nbest_with_ctranslate2

        s = settings or self.settings
        search = SearchSettings(
            s.beam_size, s.length_penalty, s.max_len_a, s.max_len_b, s.max_tokens
        )
        return translate_nbest_with_ctranslate2(self.model, texts, search, n_best)


def open_translator(request: DecodeRequest, *, min_beam: int = 1) -> Translator:
    """The run or export of `request`, ready to translate; the beam is the requested one, else
    the config's but at least `min_beam`."""
    from tfm.commands.deployed import is_exported

    if is_exported(request):
        from tfm.commands.deployed import _open

        model, search = _open(request, min_beam=min_beam)
        settings = DecodeSettings(
            search.max_len_a,
            int(search.max_len_b),
            search.max_tokens,
            torch.device("cpu"),
            torch.float32,
            beam_size=search.beam_size,
            length_penalty=search.length_penalty,
        )
        return ExportTranslator(model, settings)
    from tfm.prediction.opening import open_decoding

    return TorchTranslator(open_decoding(request, min_beam=min_beam))

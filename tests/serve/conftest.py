"""Fixtures of the server tests: the shared trained run opened as a `Translator` and as an int8
export, and a translator double whose decoding the test holds up and whose batches it sees."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest
from tiny_models import decode_settings, single_thread

from tfm.commands.engines import open_translator
from tfm.prediction.settings import DecodeRequest, DecodeSettings
from tfm.prediction.translator import Rating


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with single_thread():
        yield


@pytest.fixture(scope="module")
def translator(trained_run):
    """The shared trained run (tests/conftest.py), opened for decoding on the CPU."""
    return open_translator(DecodeRequest(run=trained_run, device="cpu", threads=1))


@pytest.fixture(scope="module")
def exported(trained_run, tmp_path_factory):
    """The shared trained run exported to CTranslate2 with int8 weights, opened for decoding."""
    pytest.importorskip("ctranslate2")
    from tfm.deploy import export_run

    folder = tmp_path_factory.mktemp("export") / "int8"
    export_run(trained_run, folder, quantization="int8")
    return open_translator(DecodeRequest(run=folder, threads=1))


@dataclass
class HeldTranslator:
    """A translator double (the methods of `Translator` the server calls): each text's
    translation is the text upper-cased, n-best lists score hypothesis k as -k; it waits for
    `release` before each call, sleeps `seconds` a source in it, and records each call's texts
    in `calls`. `failing`: an exception raised by a call whose texts hold the text "fail"."""

    config: object = None
    tokenizer: object = None
    settings: DecodeSettings = field(default_factory=decode_settings)
    engine: str = "torch"
    shows_attention: bool = False
    step: int | None = 7
    tgt_langs: tuple[str, ...] | None = None
    release: threading.Event = field(default_factory=threading.Event)
    seconds: float = 0.0
    failing: BaseException | None = None
    calls: list[list[str]] = field(default_factory=list)
    confidence_map: object = None
    unmapped: str = "a translator double has no confidence map"

    def best_of(self, texts, sources, settings, numbers):
        assert self.release.wait(60)
        self.calls.append(list(texts))
        if self.failing is not None and "fail" in texts:
            raise self.failing
        time.sleep(self.seconds * len(texts))
        return [text.upper() for text in texts]

    def ranked_beams(self, texts, sources, settings, numbers, n_best=1):
        found = self.best_of(texts, sources, settings, numbers)
        hypotheses = settings.strategy.hypotheses(n_best)
        return [[(text, -float(k)) for k in range(hypotheses)] for text in found]

    def rated_beams(self, texts, sources, settings, numbers, n_best=1):
        found = self.ranked_beams(texts, sources, settings, numbers, n_best)
        return [[Rating(text, score, None, None) for text, score in scored[:n_best]]
                for scored in found]  # fmt: skip


class WordTokenizer:
    """One token a word, for the token budget of the batching worker."""

    def encode_src(self, texts, *, tag=None):
        return [[f"<{tag}>"] * bool(tag) + text.split() for text in texts]


@pytest.fixture
def held(translator):
    """A `HeldTranslator` with the trained run's config (for /info) and a word tokenizer."""
    double = HeldTranslator(config=translator.config, tokenizer=WordTokenizer())
    yield double
    double.release.set()  # let the worker finish whatever a failed test left waiting

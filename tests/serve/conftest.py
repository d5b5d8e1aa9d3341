"""Fixtures of the server tests: the shared trained run opened as a `Translator`, and a
translator double whose decoding the test holds up and whose batches it sees."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest
from tiny_models import decode_settings, single_thread

from tfm.commands.engines import open_translator
from tfm.prediction.settings import DecodeRequest, DecodeSettings


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with single_thread():
        yield


@pytest.fixture(scope="module")
def translator(trained_run):
    """The shared trained run (tests/conftest.py), opened for decoding on the CPU."""
    return open_translator(DecodeRequest(run=trained_run, device="cpu", threads=1))


@dataclass
class HeldTranslator:
    """A `Translator` double: each text's translation is the text upper-cased, n-best lists
    score hypothesis k as -k; it waits for `release` before each call and records each call's
    texts in `calls`."""

    config: object = None
    tokenizer: object = None
    settings: DecodeSettings = field(default_factory=decode_settings)
    engine: str = "torch"
    shows_attention: bool = False
    step: int | None = 7
    release: threading.Event = field(default_factory=threading.Event)
    calls: list[list[str]] = field(default_factory=list)

    def translate(self, texts, *, first_line=1, settings=None):
        assert self.release.wait(60)
        self.calls.append(list(texts))
        return [text.upper() for text in texts]

    def nbest(self, texts, n_best, *, first_line=1, settings=None):
        return [[(text, -float(k)) for k in range(n_best)] for text in self.translate(texts)]


class WordTokenizer:
    """One token a word, for the token budget of the batching worker."""

    def encode_src(self, texts):
        return [text.split() for text in texts]


@pytest.fixture
def held(translator):
    """A `HeldTranslator` with the trained run's config (for /info) and a word tokenizer."""
    double = HeldTranslator(config=translator.config, tokenizer=WordTokenizer())
    yield double
    double.release.set()  # let the worker finish whatever a failed test left waiting

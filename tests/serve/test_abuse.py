"""Requests that used to hurt `tfm serve`, against a server on 127.0.0.1 of each engine (the
trained run, and its int8 export): text that is not Unicode, JSON nested too deep, a charset
other than UTF-8, requests over the token limits, sentences longer than the model; and what the
log holds of what users type (nothing, unless asked)."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import pytest
from http_client import call, served

from tfm.serve.app import create_app
from tfm.serve.request_limits import ServeLimits

LIMITS = ServeLimits(max_chars=3000, max_tokens=600, max_beam_tokens=1200)
SENTENCE = "the small dog sees the big cat"
LONG = "the dog sees the cat " * 60  # 300 words: longer than the model's 256 positions


@pytest.fixture(scope="module", params=["torch", "int8"])
def engine(request, translator, exported):
    return translator if request.param == "torch" else exported


@pytest.fixture(scope="module")
def server(engine):
    with served(create_app(engine, LIMITS), LIMITS) as base:
        yield base


def test_a_lone_surrogate_is_a_400_and_the_next_request_is_answered_within_a_second(server, engine):
    error = "the sentence is not valid Unicode: a lone surrogate (\\ud800) at character 2"
    bodies = {
        "/translate": b'{"sentences": ["a\\ud800b"]}',
        "/attention": b'{"sentence": "a\\ud800b"}',
    }
    for path, raw in bodies.items():
        answer = call(server, "POST", path, raw=raw)
        assert (answer.status, answer.json()) == (400, {"error": error})
    started = time.monotonic()
    answer = call(server, "POST", "/translate", {"sentences": [SENTENCE]})
    assert time.monotonic() - started < 1
    assert answer.json()["translations"] == engine.translate([SENTENCE])
    assert call(server, "GET", "/health").json() == {"status": "ok"}


def test_deep_json_and_a_charset_other_than_utf_8_are_refused_in_one_line(server):
    nested = b'{"sentences": ' + b"[" * 2000 + b"]" * 2000 + b"}"
    answer = call(server, "POST", "/translate", raw=nested)
    assert (answer.status, answer.json()) == (400, {"error": "invalid JSON: nested too deeply"})
    latin = {"Content-Type": "application/json; charset=latin-1"}
    answer = call(server, "POST", "/translate", raw='{"sentences": ["é"]}'.encode("latin-1"),
                  headers=latin)  # fmt: skip
    assert answer.status == 415
    assert answer.json() == {
        "error": "charset latin-1: send the body in UTF-8, the charset of JSON"
    }
    utf8 = {"Content-Type": 'application/json; charset="UTF-8"'}
    answer = call(server, "POST", "/translate", raw=b'{"sentences": ["a dog"]}', headers=utf8)
    assert answer.status == 200


def source_tokens(engine, sentences: list[str]) -> int:
    """What the server counts: each sentence's tokens and its </s>, up to the model's 256."""
    return sum(min(len(ids) + 1, 256) for ids in engine.tokenizer.encode_src(sentences))


def test_requests_over_the_token_limits_are_413s_that_name_the_limit(server, engine):
    many = [" ".join([SENTENCE] * 3)] * 30
    tokens = source_tokens(engine, many)
    assert tokens > 600
    answer = call(server, "POST", "/translate", {"sentences": many})
    assert (answer.status, answer.json()["error"]) == (
        413, f"the request has {tokens:,} source tokens; at most 600 a request (--max-tokens): "
        "send fewer or shorter sentences",
    )  # fmt: skip
    some = many[:16]
    tokens = source_tokens(engine, some)
    assert 300 < tokens <= 600
    answer = call(server, "POST", "/translate", {"sentences": some, "beam_size": 4})
    assert (answer.status, answer.json()["error"]) == (
        413, f"beam 4 × {tokens} source tokens is {4 * tokens:,}; at most 1,200 a request "
        "(--max-beam-tokens): send fewer sentences or a narrower beam",
    )  # fmt: skip
    assert call(server, "POST", "/translate", {"sentences": some, "beam_size": 2}).status == 200
    samples = {"sentences": some, "strategy": "sampling", "n_best": 4}  # a row a sample
    answer = call(server, "POST", "/translate", samples)
    assert (answer.status, answer.json()["error"]) == (
        413, f"beam 4 × {tokens} source tokens is {4 * tokens:,}; at most 1,200 a request "
        "(--max-beam-tokens): send fewer sentences or a narrower beam",
    )  # fmt: skip


def test_a_seed_the_engine_cannot_repeat_is_a_422_and_no_traceback(server, engine, caplog):
    caplog.set_level(logging.INFO)
    body = {"sentences": [SENTENCE], "strategy": "sampling", "seed": 1}
    answer = call(server, "POST", "/translate", body)
    if engine.engine == "torch":
        assert answer.status == 200
    else:
        assert (answer.status, answer.json()["error"]) == (
            422, "seed 1: a CTranslate2 export cannot repeat seeded samples; sample without a "
            "seed (--seed, decoding.seed), or decode with the tfm run",
        )  # fmt: skip
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_sentence_cut_to_the_model_is_named_in_the_answer(server, engine):
    sentences = ["a bird sleeps", LONG]
    answer = call(server, "POST", "/translate", {"sentences": sentences}).json()
    assert (answer["translations"], answer["truncated"]) == (engine.translate(sentences), [1])
    short = call(server, "POST", "/translate", {"sentences": sentences[:1]}).json()
    assert "truncated" not in short


def test_the_attention_of_a_sentence_cut_to_the_model_says_so(translator):
    with served(create_app(translator, LIMITS), LIMITS) as base:
        answer = call(base, "POST", "/attention", {"sentence": LONG}).json()
        assert answer["truncated"] is True and len(answer["source_tokens"]) == 256
        assert "truncated" not in call(base, "POST", "/attention", {"sentence": SENTENCE}).json()


def test_no_request_text_is_logged_unless_asked(translator, caplog):
    caplog.set_level(logging.DEBUG)
    said = ["the big cat sleeps", "a small bird sees the dog"]
    for log_text in (False, True):
        caplog.clear()
        limits = replace(LIMITS, max_chars=30)
        with served(create_app(translator, limits, log_text=log_text), limits) as base:
            answers = [
                call(base, "POST", "/translate", {"sentences": said}),
                call(base, "POST", "/translate", {"sentences": said, "n_best": 2}),
                call(base, "POST", "/attention", {"sentence": said[0]}),
                call(base, "POST", "/translate", {"sentences": [said[0] + " and the bird"]}),
                call(base, "POST", "/translate", raw=b'{"sentences": ["' + said[1].encode()),
            ]
        assert [a.status for a in answers] == [200, 200, 200, 413, 400]
        texts = [*said, *answers[0].json()["translations"], answers[2].json()["translation"]]
        logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
        found = [line for line in logged if any(text in line for text in texts)]
        if log_text:  # each answered request: one line with what it said and its answer
            assert len(found) == 3 and all(text in "\n".join(found) for text in texts)
        else:
            assert found == [], found

"""The HTTP API of `tfm serve` against a server running on 127.0.0.1: every endpoint's answer
against the library's own decoding, every limit and bad request with its status and message,
every number field's range, the API key, the page's headers, a failure nobody expected, the
bounded queue, the timeout, and dynamic batching."""

from __future__ import annotations

import re
import threading
import time

import pytest
from http_client import call, served

from tfm.config import ranges
from tfm.decoding_options import DECODING_SETTINGS
from tfm.prediction.attention_weights import KINDS
from tfm.serve.app import create_app
from tfm.serve.bodies import TranslateBody
from tfm.serve.request_limits import ServeLimits

SENTENCES = ["the small dog sees the big cat", "a bird sleeps", ""]
LIMITS = ServeLimits(max_body_bytes=2000, max_sentences=4, max_chars=80, timeout_s=30)


@pytest.fixture(scope="module")
def server(translator):
    with served(create_app(translator, LIMITS), LIMITS) as base:
        yield base


def test_health_and_info_describe_the_run(server, translator):
    assert call(server, "GET", "/health").json() == {"status": "ok"}
    info = call(server, "GET", "/info").json()
    config = translator.config
    assert (info["src_lang"], info["tgt_lang"]) == (config.data.src_lang, config.data.tgt_lang)
    assert info["engine"] == "torch" and info["step"] == translator.step == 200
    assert info["model"]["d_model"] == config.model.d_model
    assert info["decoding"] == {"strategy": "greedy", "max_len_a": 1.5, "max_len_b": 5}
    assert info["limits"]["max_sentences"] == 4 and info["attention"] is True
    assert info["auth"] is False
    found = translator.confidence_map  # fitted when the run trained
    assert info["confidence"] == {"map": True, "low": found.low, "strategy": "greedy",
                                  "fitted": found.fitted}  # fmt: skip


def test_info_says_when_answers_have_no_confidences_without_naming_files(held):
    with served(create_app(held, LIMITS), LIMITS) as base:
        info = call(base, "GET", "/info").json()
    why = "the model has no confidence map (tfm calibrate fits one)"
    assert info["confidence"] == {"map": False, "why": why}


def test_translate_gives_what_the_library_gives(server, translator):
    answer = call(server, "POST", "/translate", {"sentences": SENTENCES})
    assert answer.status == 200
    [best] = zip(*translator.rated(SENTENCES), strict=True)
    assert answer.json() == {
        "translations": translator.translate(SENTENCES),
        "scores": [pytest.approx(rating.score) for rating in best],
        "confidences": [rating.confidence for rating in best],
    }
    assert answer.json()["translations"][2] == ""  # an empty line stays empty
    confidences = answer.json()["confidences"]  # the run's map, fitted when it trained
    assert all(0 <= c <= 100 for c in confidences[:2]) and confidences[2] is None


def test_n_best_beam_and_length_penalty_are_those_asked_for(server, translator):
    body = {"sentences": SENTENCES[:2], "n_best": 3, "beam_size": 4, "length_penalty": 1.5}
    found = call(server, "POST", "/translate", body).json()
    asked = {"beam_size": 4, "length_penalty": 1.5}
    settings = translator.settings.asking(translator.config.decoding, asked)
    expected = translator.rated(SENTENCES[:2], 3, settings=settings)
    assert found["n_best"] == [
        [{"translation": r.translation, "score": pytest.approx(r.score),
          "confidence": r.confidence} for r in ratings]
        for ratings in expected
    ]  # fmt: skip
    assert found["translations"] == [hypotheses[0][0] for hypotheses in expected]
    scores = [h["score"] for h in found["n_best"][0]]
    assert scores == sorted(scores, reverse=True)


def test_a_request_samples_with_its_seed_as_the_library_does(server, translator):
    body = {"sentences": SENTENCES[:2], "n_best": 3, "temperature": 1.5, "seed": 4}
    found = call(server, "POST", "/translate", body).json()
    asked = {"temperature": 1.5, "seed": 4}
    settings = translator.settings.asking(translator.config.decoding, asked, n_best=3)
    expected = translator.nbest(SENTENCES[:2], 3, settings=settings)
    assert [[h["translation"] for h in found_] for found_ in found["n_best"]] == [
        [text for text, _ in hypotheses] for hypotheses in expected
    ]
    assert call(server, "POST", "/translate", body).json() == found  # the seed repeats them
    assert max(len(hypotheses) for hypotheses in found["n_best"]) > 1


def test_a_seeded_request_draws_the_same_samples_beside_another_request(translator):
    body = {"sentences": SENTENCES[:2], "n_best": 3, "temperature": 1.5, "seed": 4}
    asked = {"temperature": 1.5, "seed": 4}
    settings = translator.settings.asking(translator.config.decoding, asked, n_best=3)
    library = translator.nbest(SENTENCES[:2], 3, settings=settings)
    expected = [[text for text, _ in hypotheses] for hypotheses in library]
    tokens = sum(len(ids) + 1 for ids in translator.tokenizer.encode_src(SENTENCES[:2]))
    # One batch holds the seeded request's work: beside another request's, it would be sliced.
    limits = ServeLimits(batch_tokens=3 * tokens, batch_wait_ms=300)
    answers: dict = {}

    def light() -> None:
        answers["light"] = call(base, "POST", "/translate", {"sentences": ["a dog"]})

    with served(create_app(translator, limits), limits) as base:
        first = threading.Thread(target=light)
        first.start()
        time.sleep(0.05)  # the light request first: it takes a share of the batch it is in
        found = call(base, "POST", "/translate", body).json()
        first.join(30)
    assert answers["light"].status == 200
    assert [[h["translation"] for h in hypotheses] for hypotheses in found["n_best"]] == expected


def test_an_attention_request_is_counted_and_decoded_from_one_tokenization(
    server, translator, monkeypatch
):
    encoded: list[list[str]] = []
    encode = translator.tokenizer.encode_src
    monkeypatch.setattr(translator.tokenizer, "encode_src", lambda texts, tag=None: (
        encoded.append(list(texts)) or encode(texts, tag=tag)))  # fmt: skip
    found = call(server, "POST", "/attention", {"sentence": SENTENCES[0]}).json()
    assert encoded == [[SENTENCES[0]]]  # once: the ids the limits counted are those decoded
    assert found["source_tokens"] == translator.attention_views(SENTENCES[0])["encoder"].key_tokens


def test_attention_holds_every_kind_layer_and_head_of_the_library(server, translator):
    sentence = SENTENCES[0]
    found = call(server, "POST", "/attention", {"sentence": sentence}).json()
    views = translator.attention_views(sentence)
    for kind in KINDS:
        assert found[kind] == views[kind].weights.double().round(decimals=4).tolist()
        assert found["translation"] == views[kind].translation
    assert len(found["encoder"]) == found["layers"] == translator.config.model.n_encoder_layers
    assert len(found["cross"][0]) == found["heads"] == translator.config.model.n_heads
    cross = found["cross"][0][0]
    assert (len(cross), len(cross[0])) == (len(found["output_tokens"]), len(found["source_tokens"]))
    assert found["source_tokens"][-1] == "</s>" and found["decoder_tokens"][0] == "<s>"
    assert all(abs(sum(row) - 1) < 1e-3 for row in cross)


BAD = [  # (why, body as bytes, content type, status, start of the error)
    ("over the body limit", b'{"sentences": ["' + b"a" * 3000 + b'"]}', None, 413,
     "the body is over 2,000 bytes (--max-body-bytes)"),
    ("too many sentences", b'{"sentences": ["a", "b", "c", "d", "e"]}', None, 413,
     "5 sentences; at most 4 a request (--max-sentences)"),
    ("a sentence too long", b'{"sentences": ["' + b"a" * 81 + b'"]}', None, 413,
     "the sentence has 81 characters; at most 80 a sentence (--max-chars)"),
    ("invalid JSON", b'{"sentences": [', None, 400, "invalid JSON: Expecting value (line 1"),
    ("invalid UTF-8", b'{"sentences": ["\xff"]}', None, 400,
     "the body is not valid UTF-8 (byte 17)"),
    ("an unknown field", b'{"sentences": ["a"], "beam": 2}', None, 422, "beam: unknown field"),
    ("a wrong type", b'{"sentences": "a"}', None, 422, "sentences: Input should be a valid list"),
    ("a number as a string", b'{"sentences": ["a"], "beam_size": "2"}', None, 422, "beam_size:"),
    ("a beam too wide", b'{"sentences": ["a"], "beam_size": 17}', None, 422,
     "beam_size: expected an integer from 1 to 16"),
    ("n-best over the beam", b'{"sentences": ["a"], "n_best": 3, "beam_size": 2}', None, 422,
     "n_best 3 needs beam_size 3 or more, not 2"),
    ("an unknown strategy", b'{"sentences": ["a"], "strategy": "nucleus"}', None, 422,
     "strategy: Input should be 'greedy', 'beam' or 'sampling'"),
    ("a top p out of range", b'{"sentences": ["a"], "top_p": 1.5}', None, 422,
     "top_p: expected a number from 0.001 to 1"),
    ("a temperature that rounds to 0", b'{"sentences": ["a"], "temperature": 1e-39}', None, 422,
     "temperature: expected a number from 0.01 to 100"),
    ("a top p that rounds to 0", b'{"sentences": ["a"], "top_p": 1e-300}', None, 422,
     "top_p: expected a number from 0.001 to 1"),
    ("a NaN length penalty", b'{"sentences": ["a"], "length_penalty": NaN}', None, 422,
     "length_penalty: expected a number from 0 to 10"),
    ("settings of two strategies", b'{"sentences": ["a"], "top_k": 2, "beam_size": 2}', None,
     422, "beam_size, top_k: settings of different strategies (beam and sampling)"),
    ("no sentences", b'{"sentences": []}', None, 422, "sentences: give at least one sentence"),
    ("no JSON object", b'["a"]', None, 422, "body: Input should be a valid dictionary"),
    ("a form", b"sentences=a", "application/x-www-form-urlencoded", 415,
     "Content-Type application/x-www-form-urlencoded: expected application/json"),
]  # fmt: skip


@pytest.mark.parametrize(("why", "raw", "media", "status", "error"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_request_gets_its_status_and_a_one_line_error(server, why, raw, media, status, error):
    headers = {"Content-Type": media} if media else {}
    answer = call(server, "POST", "/translate", raw=raw, headers=headers)
    assert answer.status == status, answer.body
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"].startswith(error)
    assert "\n" not in answer.json()["error"]


HOSTILE = [
    b"1e-39",
    b"1e308",
    b"NaN",
    b"-Infinity",
    b"7" * 5000,
    b"-" + b"7" * 5000,
    b'"2"',
    b"1.5",
]


def test_every_number_is_answered_or_refused_naming_its_field_and_range(translator):
    """Each number field, given numbers that once failed in the model (500: a temperature of
    1e-39, more digits than Python's int() reads) or were refused in misleading words (NaN
    "should be ≤ 10"), answers 200 or a 422 naming the field and its range; each end of each
    range answers 200: no value that passes the body fails later."""
    numbers = {key: f for key, f in TranslateBody.model_fields.items() if ranges.expected(f)}
    assert set(numbers) == {"n_best", *(setting.key for setting in DECODING_SETTINGS)}
    limits = ServeLimits(max_body_bytes=12_000)  # room for 5,000 digits
    with served(create_app(translator, limits), limits) as server:
        _answers_or_refuses(server, numbers)


def _answers_or_refuses(server: str, numbers: dict) -> None:
    for key, field in numbers.items():
        for raw in HOSTILE:
            answer = call(server, "POST", "/translate", raw=b'{"sentences": ["a dog"], "'
                          + key.encode() + b'": ' + raw + b"}")  # fmt: skip
            assert answer.status in (200, 422), (key, raw[:20], answer.body)
            if answer.status == 422:
                assert answer.json()["error"] == f"{key}: expected {ranges.expected(field)}"
        for _, end in ranges.bounds(field, key):
            answer = call(server, "POST", "/translate", {"sentences": ["a dog"], key: end})
            assert answer.status == 200, (key, end, answer.body)
    hottest = {"sentences": SENTENCES, "top_k": 1, "temperature": 100}  # top 1: greedy
    greedy = call(server, "POST", "/translate", {"sentences": SENTENCES}).json()
    sampled = call(server, "POST", "/translate", hottest).json()
    assert sampled.pop("confidences") == [None] * len(SENTENCES)  # no map reads a sample
    assert sampled == {key: value for key, value in greedy.items() if key != "confidences"}


def test_attention_limits_and_unknown_paths_and_methods(server):
    answer = call(server, "POST", "/attention", {"sentence": "a" * 81})
    assert (answer.status, answer.json()["error"]) == (
        413, "the sentence has 81 characters; at most 80 a sentence (--max-chars)"
    )  # fmt: skip
    answer = call(server, "POST", "/attention", {"sentence": "  "})
    assert answer.status == 422
    assert answer.json()["error"] == "the sentence is empty; give the text to translate"
    assert call(server, "POST", "/attention", {"sentences": ["a"]}).status == 422
    assert call(server, "GET", "/etc/passwd").json() == {"error": "Not Found"}
    assert call(server, "GET", "/page/..%2Fapp.py").status == 404
    assert call(server, "GET", "/translate").status == 405


def test_the_api_key_is_needed_for_the_model_but_not_for_health_or_the_page(translator):
    key = "k" * 24
    with served(create_app(translator, LIMITS, api_key=key), LIMITS) as base:
        for headers in ({}, {"Authorization": "Bearer " + "x" * 24}, {"Authorization": key}):
            answer = call(base, "POST", "/translate", {"sentences": ["a"]}, headers=headers)
            assert answer.status == 401 and answer.headers["www-authenticate"] == "Bearer"
            assert answer.json()["error"].startswith("missing or wrong API key")
            assert call(base, "GET", "/info", headers=headers).status == 401
        good = {"Authorization": f"Bearer {key}"}
        answer = call(base, "POST", "/translate", {"sentences": ["a dog"]}, headers=good)
        assert answer.json()["translations"] == translator.translate(["a dog"])
        assert call(base, "GET", "/info", headers=good).json()["auth"] is True
        assert call(base, "GET", "/health").status == 200
        assert call(base, "GET", "/").status == 200


def test_the_page_forbids_framing_and_loads_nothing_from_elsewhere(server):
    page = call(server, "GET", "/")
    policy = [part.strip() for part in page.headers["content-security-policy"].split(";")]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    sources = re.findall(rb'(?:src|href)="([^"]*)"', page.body)
    assert sources and all(source.startswith(b"/page/") for source in sources)


def test_a_failure_no_endpoint_expected_is_a_500_in_one_line_like_every_error(held, caplog):
    held.config = None  # /info describes the model from it: an AttributeError
    with served(create_app(held)) as base:
        answer = call(base, "GET", "/info")
    assert (answer.status, answer.headers["content-type"]) == (500, "application/json")
    error = "internal error (AttributeError); the server's log says more"
    assert answer.body == b'{"error":"' + error.encode() + b'"}'
    assert [r.getMessage() for r in caplog.records if r.exc_info] == ["GET /info failed"]


def test_requests_that_arrive_together_are_decoded_as_one_batch(held):
    limits = ServeLimits(batch_wait_ms=200)
    with served(create_app(held, limits), limits) as base:
        answers: dict[int, object] = {}

        def ask(i: int) -> None:
            body = {"sentences": [f"sentence {i} a", f"sentence {i} b"]}
            answers[i] = call(base, "POST", "/translate", body).json()["translations"]

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        time.sleep(0.1)
        held.release.set()
        for thread in threads:
            thread.join(30)
    expected = {i: [f"SENTENCE {i} A", f"SENTENCE {i} B"] for i in range(6)}
    assert answers == expected
    assert len(held.calls) < 6 and sum(len(c) for c in held.calls) == 12


def in_thread(base: str, text: str, results: list, **options) -> threading.Thread:
    """A request for `text` sent from a thread; its answer goes into `results`."""
    body = {"sentences": [text], **options}
    thread = threading.Thread(target=lambda: results.append(call(base, "POST", "/translate", body)))
    thread.start()
    return thread


def wait_until(condition) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_full_queue_answers_503_with_retry_after(held):
    limits = ServeLimits(max_queue=2, batch_wait_ms=0)
    app = create_app(held, limits)
    worker = app.state.worker
    results: list = []
    with served(app, limits) as base:
        first = in_thread(base, "one", results)
        wait_until(lambda: worker.active)  # the worker holds "one"
        second = in_thread(base, "two", results)
        wait_until(lambda: worker.pending == 2)  # "two" waits: the queue is full
        refused = call(base, "POST", "/translate", {"sentences": ["three"]})
        assert refused.status == 503 and refused.headers["retry-after"] == "1"
        busy = "the server is busy (2 requests waiting); try again shortly"
        assert refused.json()["error"] == busy
        held.release.set()
        first.join(30)
        second.join(30)
    assert sorted(r.json()["translations"][0] for r in results) == ["ONE", "TWO"]


def test_a_request_not_answered_in_time_gets_503_and_is_not_decoded_later(held):
    limits = ServeLimits(timeout_s=0.5, batch_wait_ms=0)
    app = create_app(held, limits)
    results: list = []
    with served(app, limits) as base:
        first = in_thread(base, "started", results)
        wait_until(lambda: app.state.worker.active)
        waiting = call(base, "POST", "/translate", {"sentences": ["waiting"]})
        first.join(30)
        held.release.set()
        assert call(base, "POST", "/translate", {"sentences": ["next"]}).status == 200
    for answer in (waiting, *results):
        assert answer.status == 503 and answer.headers["retry-after"] == "5"
        assert answer.json()["error"].startswith("not answered within 0.5 s")
    assert held.calls == [["started"], ["next"]]  # "waiting" was given up, not decoded

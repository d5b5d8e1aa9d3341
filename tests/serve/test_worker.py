"""The model worker of `tfm serve` under requests that go wrong, against a server on 127.0.0.1
over a translator double (`held`, one word a token): a heavy request does not starve a light
one sent after it, its deadline is kept between its slices, a request that fails fails alone,
a request too slow for the timeout is refused up front, and a worker that stopped is reported
by /health and refuses requests at once instead of leaving them to time out."""

from __future__ import annotations

import gc
import logging
import re
import threading
import time

from http_client import call, served

from tfm.serve.app import create_app
from tfm.serve.request_limits import ServeLimits

HEAVY = [f"heavy{i} x x" for i in range(6)]  # 3 words and </s>: 4 tokens each


class Fatal(BaseException):
    """Not an error a request can cause: what the worker cannot go on after."""


def ask(base: str, sentences: list[str], answers: dict, name: str) -> threading.Thread:
    """`sentences` sent from a thread; `answers[name]` gets the answer and the time it came."""

    def send() -> None:
        answer = call(base, "POST", "/translate", {"sentences": sentences})
        answers[name] = (answer, time.monotonic())

    thread = threading.Thread(target=send)
    thread.start()
    return thread


def wait_until(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_a_light_request_after_a_heavy_one_is_answered_first(held):
    limits = ServeLimits(batch_tokens=4, batch_wait_ms=0)  # one heavy sentence a batch
    held.seconds = 0.1
    held.release.set()
    app = create_app(held, limits)
    answers: dict = {}
    with served(app, limits) as base:
        heavy = ask(base, HEAVY, answers, "heavy")
        wait_until(lambda: held.calls)  # its first slice is being decoded
        light = ask(base, ["light"], answers, "light")
        for thread in (heavy, light):
            thread.join(30)
    (heavy_answer, heavy_at), (light_answer, light_at) = answers["heavy"], answers["light"]
    assert heavy_answer.json()["translations"] == [s.upper() for s in HEAVY]
    assert light_answer.json()["translations"] == ["LIGHT"]
    assert light_at < heavy_at
    assert ["light"] in held.calls[1:3]  # the next batch once it came, ahead of the heavy rest
    assert [text for call_ in held.calls for text in call_ if text != "light"] == HEAVY


def test_the_worker_stops_a_request_whose_deadline_passed_between_its_slices(held, caplog):
    limits = ServeLimits(batch_tokens=4, batch_wait_ms=0, timeout_s=0.5)
    held.seconds = 0.2  # 6 slices: 1.2 s, over the timeout
    held.release.set()
    with served(create_app(held, limits), limits) as base:
        answer = call(base, "POST", "/translate", {"sentences": HEAVY})
        assert answer.status == 503 and answer.json()["error"].startswith("not answered within")
        started = time.monotonic()
        assert call(base, "POST", "/translate", {"sentences": ["next"]}).status == 200
        # At most the slice under way (0.2 s), then "next"; the rest of the heavy request
        # would take 0.6 s more (the count below shows it was dropped).
        assert time.monotonic() - started < 0.8
    decoded = [text for call_ in held.calls for text in call_]
    assert decoded[-1] == "next" and len(decoded) <= 5  # the heavy rest was dropped
    gc.collect()  # a result nobody took would be logged now, as asyncio collects its future
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_request_that_fails_fails_alone_and_the_worker_goes_on(held, caplog):
    held.failing = RuntimeError("a bug")
    limits = ServeLimits(batch_wait_ms=300)
    app = create_app(held, limits)
    answers: dict = {}
    with served(app, limits) as base:
        threads = [ask(base, [text], answers, text) for text in ("fail", "fine")]
        wait_until(lambda: app.state.worker.pending == 2)
        held.release.set()
        for thread in threads:
            thread.join(30)
        assert call(base, "GET", "/health").json() == {"status": "ok"}
        assert call(base, "POST", "/translate", {"sentences": ["later"]}).status == 200
    failed, fine = answers["fail"][0], answers["fine"][0]
    assert (failed.status, failed.json()) == (
        500,
        {"error": "decoding failed; the server's log says why"},
    )
    assert fine.json()["translations"] == ["FINE"]
    assert sorted(map(sorted, held.calls)) == [["fail"], ["fail", "fine"], ["fine"], ["later"]]
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in failures] == ["decoding a request of 1 sentence(s) failed"]


def test_a_worker_that_ended_is_reported_by_health_and_refuses_at_once(held):
    held.failing = Fatal("the device is gone")
    held.release.set()
    app = create_app(held)
    with served(app) as base:
        answer = call(base, "POST", "/translate", {"sentences": ["fail"]})
        stopped = "the model worker stopped (Fatal: the device is gone)"
        assert (answer.status, answer.json()) == (
            503,
            {"error": f"nothing can be translated: {stopped}"},
        )
        health = call(base, "GET", "/health")
        assert (health.status, health.json()) == (503, {"status": "stopped", "error": stopped})
        started = time.monotonic()
        assert call(base, "POST", "/translate", {"sentences": ["next"]}).status == 503
        assert time.monotonic() - started < 1
    assert held.calls == [["fail"]]


def test_health_says_503_once_the_worker_is_stopped(held):
    held.release.set()
    app = create_app(held)
    with served(app) as base:
        assert call(base, "POST", "/translate", {"sentences": ["one"]}).status == 200
        app.state.worker.stop()
        health = call(base, "GET", "/health")
        assert health.status == 503 and health.json()["status"] == "stopped"
        answer = call(base, "POST", "/translate", {"sentences": ["two"]})
        assert answer.status == 503
        assert answer.json()["error"] == "nothing can be translated: the server is stopping"


def test_a_request_slower_than_the_timeout_alone_is_refused_before_it_is_queued(held):
    limits = ServeLimits(batch_tokens=8, batch_wait_ms=0, timeout_s=1)
    held.seconds = 0.05
    held.release.set()
    with served(create_app(held, limits), limits) as base:
        words = ["a", "b", "c", "d"]  # 2 tokens each: one batch of 8, about 0.2 s
        assert call(base, "POST", "/translate", {"sentences": words}).status == 200
        heavy = [f"{i} y z" for i in range(25)]  # 100 tokens: about 2.5 s at that speed
        answer = call(base, "POST", "/translate", {"sentences": heavy})
        assert answer.status == 413
        error = answer.json()["error"]
        assert error.startswith("beam 1 × 100 source tokens would take about ")
        assert error.endswith(
            " over its 1 s timeout (--timeout): send fewer sentences or a narrower beam"
        )
    assert held.calls == [words]


def heavy(name: str, count: int) -> list[str]:
    """`count` sentences of 4 tokens each (3 words and </s>), named `name`."""
    return [f"{name}{i} x x" for i in range(count)]


BUSY = "the server is busy: the work queued ahead of this request would take about "


def test_a_request_the_work_ahead_keeps_past_its_deadline_is_refused_at_once(held):
    limits = ServeLimits(batch_tokens=8, batch_wait_ms=0, timeout_s=1)
    held.seconds = 0.05  # a batch of 2 sentences: 8 of work in 0.1 s
    held.release.set()
    answers: dict = {}
    with served(create_app(held, limits), limits) as base:
        assert call(base, "POST", "/translate", {"sentences": heavy("warm", 2)}).status == 200
        first = ask(base, heavy("one", 12), answers, "one")  # 48 of work: 0.6 s alone
        wait_until(lambda: held.calls[-1][0].startswith("one"))
        started = time.monotonic()
        refused = call(base, "POST", "/translate", {"sentences": heavy("two", 12)})
        assert time.monotonic() - started < 0.3  # refused, not queued
        assert (refused.status, refused.headers["retry-after"]) == (503, "1")
        # About 0.5 s of "one" is ahead; its own 0.6 s leave 0.4 s of the timeout for waiting,
        # and a wait is counted half as long again: 0.27 s allowed.
        waiting = r"0\.\d s, more than the 0\.\d s its 1 s timeout leaves for waiting"
        assert re.fullmatch(f"{BUSY}{waiting}; try again in 1 s", refused.json()["error"])
        light = call(base, "POST", "/translate", {"sentences": ["light"]})
        assert light.json()["translations"] == ["LIGHT"]  # it goes ahead of the heavy rest
        first.join(30)
    assert answers["one"][0].status == 200
    assert not [text for call_ in held.calls for text in call_ if text.startswith("two")]


def test_a_crowd_that_came_before_the_speed_was_known_is_answered_in_turn_or_refused_early(held):
    limits = ServeLimits(batch_tokens=8, batch_wait_ms=0, timeout_s=1.5)
    held.seconds = 0.05  # each request 48 of work, 0.6 s: two fit in the timeout, not three
    app = create_app(held, limits)
    answers: dict = {}
    with served(app, limits) as base:
        threads = [ask(base, ["light"], answers, "light")]  # not a batch that measures speed
        wait_until(lambda: app.state.worker.pending == 1)
        threads += [ask(base, heavy(f"h{i}-", 12), answers, f"h{i}-") for i in range(4)]
        wait_until(lambda: app.state.worker.pending == 5)  # all taken: the speed is not known
        sent = time.monotonic()
        held.release.set()
        for thread in threads:
            thread.join(30)
    heavies = {name: answers[name] for name in answers if name != "light"}
    statuses = sorted(answer.status for answer, _ in heavies.values())
    assert statuses[0] == 200 and statuses[-1] == 503  # some answered, some refused
    decoded = [text.split("-")[0] for call_ in held.calls for text in call_ if "-" in text]
    for name, (answer, at) in heavies.items():
        if answer.status == 503:  # refused once the first batch measured the speed
            assert answer.json()["error"].startswith(BUSY) and at - sent < 0.5
            assert name.rstrip("-") not in decoded
    answered = [name.rstrip("-") for name, (a, _) in heavies.items() if a.status == 200]
    runs = [name for i, name in enumerate(decoded) if i == 0 or decoded[i - 1] != name]
    assert sorted(runs) == sorted(answered)  # each decoded in one run: one after another

"""Connections to `tfm serve` that never make a proper request, against a server on 127.0.0.1:
idle ones and ones that send their headers or body a byte at a time are closed after the read
timeout, idle ones after an answer after the keep-alive; headers over 16 KiB are a 400 however
they arrive; a client holding the connection cap leaves room for others, and its own
connections over the cap get a plain-text 503; a client that leaves mid-body leaves no
traceback; and a key-less server answers only to loopback's names in the Host header."""

from __future__ import annotations

import json
import logging
import socket
import time
from dataclasses import replace

import pytest
from http_client import call, served

from tfm.serve.app import create_app
from tfm.serve.request_limits import ServeLimits

LIMITS = ServeLimits(read_timeout_s=0.5, keep_alive_s=1, max_connections=4)


@pytest.fixture(scope="module")
def server(translator):
    with served(create_app(translator, LIMITS), LIMITS) as base:
        yield base


def connect(base: str, source: str = "127.0.0.1") -> socket.socket:
    """A connection to `base` from the loopback address `source`."""
    address = ("127.0.0.1", int(base.rsplit(":", 1)[1]))
    return socket.create_connection(address, timeout=5, source_address=(source, 0))


def read_until(connection: socket.socket, end: bytes) -> bytes:
    """What `connection` receives up to and including `end`."""
    answer = b""
    while not answer.endswith(end):
        chunk = connection.recv(4096)
        assert chunk, f"closed after {answer!r}"
        answer += chunk
    return answer


def read_to_the_end(connection: socket.socket) -> bytes:
    """What `connection` receives until the server closes it."""
    answer = b""
    while chunk := connection.recv(4096):
        answer += chunk
    return answer


def health(connection: socket.socket) -> None:
    """GET /health on `connection`, its whole answer read."""
    connection.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    read_until(connection, b'{"status":"ok"}')


def closed_after(connection: socket.socket, trickle: bytes = b"") -> float:
    """Seconds until the server closes `connection`, sending `trickle` a byte each 0.05 s."""
    started = time.monotonic()
    connection.settimeout(0.05)
    for byte in [trickle[i : i + 1] for i in range(len(trickle))] + [b""] * 200:
        try:
            if byte:
                connection.send(byte)
            if connection.recv(4096) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except ConnectionError:
            return time.monotonic() - started
    raise AssertionError("the connection was not closed")


def test_a_connection_that_sends_nothing_or_its_headers_slowly_is_closed(server):
    with connect(server) as idle:
        assert 0.4 < closed_after(idle) < 2
    slow = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 200
    with connect(server) as trickling:
        assert 0.4 < closed_after(trickling, slow) < 2
    assert call(server, "GET", "/health").status == 200


def test_a_body_that_does_not_arrive_in_time_is_a_408(server):
    with connect(server) as connection:
        connection.sendall(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                           b"application/json\r\nContent-Length: 100\r\n\r\n{")  # fmt: skip
        started = time.monotonic()
        error = b'{"error":"the body did not arrive within 0.5 s (--read-timeout)"}'
        answer = read_until(connection, error)
        assert 0.4 < time.monotonic() - started < 2
    assert answer.startswith(b"HTTP/1.1 408 ")


def test_an_idle_connection_after_an_answer_is_closed_after_the_keep_alive(server):
    with connect(server) as connection:
        for _ in range(2):  # idle after an answer: the keep-alive, not the read timeout
            health(connection)
            time.sleep(0.7)
        assert 0.1 < closed_after(connection) < 1.5
    with connect(server) as connection:  # the first byte of the next request starts its time
        health(connection)
        assert 0.4 < closed_after(connection, b"GET /health HTTP/1.1\r\nX: " + b"a" * 200) < 2


def test_a_client_holding_the_cap_leaves_room_for_others_and_is_answered_503_over_it(translator):
    limits = replace(LIMITS, read_timeout_s=5)  # the held connections stay for the test
    with served(create_app(translator, limits), limits) as base:
        held = [connect(base, "127.0.0.2") for _ in range(4)]
        try:
            time.sleep(0.1)  # all four accepted: the cap
            with connect(base, "127.0.0.2") as over:  # over it, from the same address
                over.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                answer = read_to_the_end(over)
            assert answer.startswith(b"HTTP/1.1 503 ") and answer.endswith(b"Service Unavailable")
            assert b"content-type: text/plain; charset=utf-8" in answer
            for _ in range(2):  # another address gets in, in place of the longest waiting
                assert call(base, "GET", "/health").status == 200
            assert closed_after(held[0]) < 0.3
            for connection in held[1:]:  # the others are still open and answered
                health(connection)
        finally:
            for connection in held:
                connection.close()


@pytest.mark.parametrize("kib", [17, 100])
def test_headers_over_16_kib_are_a_400_also_in_one_write(server, kib):
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: "
    with connect(server) as connection:
        connection.sendall(head + b"a" * (kib * 1024) + b"\r\n\r\n")
        answer = read_to_the_end(connection)
    assert answer.startswith(b"HTTP/1.1 400 ") and b"\r\nInvalid HTTP request received." in answer
    with connect(server) as connection:  # 15 KiB is within the limit
        connection.sendall(head + b"a" * (15 * 1024) + b"\r\n\r\n")
        assert read_until(connection, b'{"status":"ok"}').startswith(b"HTTP/1.1 200 ")


def test_a_client_that_leaves_mid_body_leaves_no_traceback(server, caplog):
    caplog.set_level(logging.DEBUG)
    with connect(server) as connection:
        connection.sendall(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                           b'{"sentences": ["a')  # fmt: skip
        time.sleep(0.1)
    assert call(server, "POST", "/translate", {"sentences": ["a dog"]}).status == 200
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not [r for r in caplog.records if r.exc_info]


@pytest.mark.parametrize("host", ["127.0.0.1:1234", "localhost", "LOCALHOST:80", "[::1]:8000"])
def test_a_server_without_a_key_answers_to_loopback_names(server, host):
    answer = call(server, "GET", "/health", headers={"Host": host})
    assert (answer.status, answer.json()) == (200, {"status": "ok"})


@pytest.mark.parametrize("host", ["rebound.example:8000", "[::1]rebound.example", "localhost:x"])
def test_a_server_without_a_key_refuses_other_host_names(server, host):
    for path in ("/", "/health", "/info"):
        answer = call(server, "GET", path, headers={"Host": host})
        error = (f"Host {host} is not a name of this server: without an API key it answers "
                 "only to 127.0.0.1, ::1, localhost")  # fmt: skip
        assert answer.status == 403  # spaced as every other error answer is
        assert answer.body == json.dumps({"error": error}, separators=(",", ":")).encode()


def test_a_server_without_a_key_refuses_an_empty_or_missing_host(server, translator):
    answer = call(server, "GET", "/health", headers={"Host": ""})
    assert (answer.status, answer.json()["error"]) == (403, (
        "a request without a Host is not a name of this server: without an API key it answers "
        "only to 127.0.0.1, ::1, localhost"
    ))  # fmt: skip
    with connect(server) as connection:  # HTTP/1.0 needs no Host
        connection.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        assert read_until(connection, b'localhost"}').startswith(b"HTTP/1.1 403 ")
    with served(create_app(translator, hosts=None)) as base:  # a key, or --no-auth elsewhere
        assert call(base, "GET", "/health", headers={"Host": "tfm.example"}).status == 200

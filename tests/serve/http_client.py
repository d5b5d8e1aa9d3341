"""A small HTTP client for the server tests (the standard library's, to 127.0.0.1 only), and a
server run in a thread of the test process on a free loopback port."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.client import HTTPConnection
from urllib.parse import urlsplit

import uvicorn

from tfm.serve.connections import uvicorn_config
from tfm.serve.request_limits import ServeLimits

TIMEOUT_S = 60  # no request of a test waits longer


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


def call(
    base: str,
    method: str,
    path: str,
    data: object = None,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One request to `base` (http://127.0.0.1:PORT): `data` as JSON, or the bytes `raw`."""
    address = urlsplit(base)
    assert address.hostname == "127.0.0.1", base  # tests talk to loopback only
    connection = HTTPConnection(address.hostname, address.port, timeout=TIMEOUT_S)
    sent = {"Content-Type": "application/json", **(headers or {})}
    body = raw if raw is not None else None if data is None else json.dumps(data).encode()
    try:
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()},
                      response.read())  # fmt: skip
    finally:
        connection.close()


@contextlib.contextmanager
def served(app, limits: ServeLimits | None = None) -> Iterator[str]:
    """`app` served by uvicorn in a thread on 127.0.0.1 (a free port), as `tfm serve` serves it
    under `limits` (the limits `app` was made with; default: the defaults), its lifespan run;
    yields the base URL and stops the server (waiting for its requests) on leaving."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn_config(app, limits or ServeLimits()))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + TIMEOUT_S
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(TIMEOUT_S)
        sock.close()

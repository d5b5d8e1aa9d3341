"""What every request passes before its endpoint, as one ASGI middleware: the Host check of a
key-less server on loopback, and the last answer to a failure no endpoint expected.

A server on loopback without a key trusts whoever can reach it, which a page on another site
can be, through DNS rebinding: its name is made to resolve to 127.0.0.1, and the browser sends
that name as the Host. Such a server answers only to the names of loopback (127.0.0.1,
localhost, [::1], and the address it was given), on any port; others get 403.

An exception no endpoint turned into an answer is a bug: it is answered 500 with one line, and
logged with its traceback (the log shows each kind once, `tfm.serve.server_log`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def host_name(host: str) -> str:
    """The name in a Host header, without its port and brackets: "[::1]:8000" → "::1"."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, _, port = host.rpartition(":")
    return name if name and port.isdigit() else host


class Guard:
    """The ASGI application `app` behind the Host check (when `hosts` names the names to
    answer; None: no check) and the last-resort 500."""

    def __init__(self, app: Any, *, hosts: Iterable[str] | None) -> None:
        self.app = app
        self.hosts = None if hosts is None else frozenset(name.lower() for name in hosts)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self._refused_host(scope)
        if refused is not None:
            await _answer(send, 403, refused)
            return
        started = False

        async def tracked(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            log.exception("%s %s failed", scope["method"], scope["path"])
            if not started:
                await _answer(send, 500, f"internal error ({type(exc).__name__}); the server's "
                              "log says more")  # fmt: skip

    def _refused_host(self, scope: dict) -> str | None:
        if self.hosts is None:
            return None
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if not host or host_name(host).lower() in self.hosts:
            return None
        return (
            f"Host {host} is not a name of this server: without an API key it answers only "
            f"to {', '.join(sorted(self.hosts))}"
        )


async def _answer(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

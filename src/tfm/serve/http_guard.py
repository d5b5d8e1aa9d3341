"""What every request passes before its endpoint, as one ASGI middleware: the Host check of a
key-less server on loopback, and the last answer to a failure no endpoint expected.

A server on loopback without a key trusts whoever can reach it, which a page on another site
can be, through DNS rebinding: its name is made to resolve to 127.0.0.1, and the browser sends
that name as the Host. Such a server answers only to the names of loopback (127.0.0.1,
localhost, [::1], and the address it was given), on any port; others, a Host that is not a
name and a port, and a missing or empty one get 403.

An exception no endpoint turned into an answer is a bug: it is answered 500 with one line, and
logged with its traceback (the log shows each kind once, `tfm.serve.server_log`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from starlette.responses import JSONResponse

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def host_name(host: str) -> str | None:
    """The name in a Host header, without its port and brackets ("[::1]:8000" → "::1"), or
    None when the header is not a name and an optional port ("[::1]x", "a:b", "")."""
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and _is_port(rest[1:]))):
            return None
    else:
        name, colon, port = host.partition(":")
        if colon and not _is_port(port):
            return None
    return name or None


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit()


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
            await _answer(scope, receive, send, 403, refused)
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
                failed = f"internal error ({type(exc).__name__}); the server's log says more"
                await _answer(scope, receive, send, 500, failed)

    def _refused_host(self, scope: dict) -> str | None:
        if self.hosts is None:
            return None
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        name = host_name(host)
        if name is not None and name.lower() in self.hosts:
            return None
        given = f"Host {host}" if host else "a request without a Host"
        return (
            f"{given} is not a name of this server: without an API key it answers only to "
            f"{', '.join(sorted(self.hosts))}"
        )


async def _answer(scope: dict, receive: Any, send: Any, status: int, message: str) -> None:
    """The error `message` with `status`, as every other error is answered."""
    await JSONResponse({"error": message}, status)(scope, receive, send)

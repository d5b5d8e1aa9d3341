"""How `tfm serve` treats connections: uvicorn's settings made from the limits, and the one
guard uvicorn lacks, a deadline for a request's headers.

uvicorn (with h11, its pure-Python HTTP/1.1 parser) gives: `timeout_keep_alive` (an idle
connection is closed `keep_alive_s` after an answer), `limit_concurrency` (at
`max_connections` connections or requests in flight, a request is answered 503),
`h11_max_incomplete_event_size` (headers over 16 KiB are a 400) and
`timeout_graceful_shutdown`. It has no timeout for a connection that sends nothing, or its
headers a byte at a time: `GuardedH11` closes a connection whose request headers have not all
arrived `read_timeout_s` after it opened, or after their first byte once it was answered
(until then the keep-alive decides how long it may stay idle), and closes at once the
connections beyond `max_connections`, so that idle clients cannot take every file
descriptor. The body has its own deadline (`tfm.serve.bodies`, 408).
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from tfm.serve.request_limits import ServeLimits

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 16 * 1024


def uvicorn_config(app: Any, limits: ServeLimits) -> uvicorn.Config:
    """The uvicorn configuration of `app` under `limits`: HTTP/1.1 only, no access log."""
    return uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        ws="none",
        lifespan="on",
        log_config=None,
        log_level="warning",
        access_log=False,
        server_header=False,
        timeout_keep_alive=limits.keep_alive_s,
        limit_concurrency=limits.max_connections,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        # the requests in flight end within their timeout; their answers need a moment more
        timeout_graceful_shutdown=math.ceil(limits.timeout_s) + 5,
    )


def guarded_protocol(limits: ServeLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the header deadline and the connection cap of `limits`."""

    class GuardedH11(H11Protocol):
        header_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                log.warning("over %d connections: new ones are closed until some end",
                            limits.max_connections)  # fmt: skip
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the headers are all in
                self._disarm()
            elif self.header_deadline is None:  # the first bytes of a request after an answer
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self.header_deadline = self.loop.call_later(limits.read_timeout_s, self._expire)

        def _disarm(self) -> None:
            if self.header_deadline is not None:
                self.header_deadline.cancel()
                self.header_deadline = None

        def _expire(self) -> None:
            self.header_deadline = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return GuardedH11

"""How `tfm serve` treats connections: uvicorn's settings made from the limits, and the guards
uvicorn lacks: a deadline for a request's headers, a limit on their size however they arrive,
and each client address's share of the connections.

uvicorn (with h11, its pure-Python HTTP/1.1 parser) gives: `timeout_keep_alive` (an idle
connection is closed `keep_alive_s` after an answer), `h11_max_incomplete_event_size` (headers
over 16 KiB still arriving are a 400) and `timeout_graceful_shutdown`. `GuardedH11` adds the
rest. It closes a connection whose request headers have not all arrived `read_timeout_s` after
it opened, or after their first byte once it was answered (until then the keep-alive decides
how long it may stay idle), so that idle clients cannot take every file descriptor. A request
whose headers are over 16 KiB is a 400 also when they arrive in one piece (h11 measures only
those still incomplete). And it shares `max_connections` between client addresses
(`tfm.serve.connection_shares`): a connection over an address's share is answered uvicorn's
plain-text 503 once its request comes, instead of being closed unanswered. uvicorn's own
`limit_concurrency` is not used: it counts every connection of every address, so one client
holding many would have everyone else answered 503. The body has its own deadline
(`tfm.serve.bodies`, 408).
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.h11_impl import H11Protocol

from tfm.serve.connection_shares import Admission, ConnectionShares
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
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        # the requests in flight end within their timeout; their answers need a moment more
        timeout_graceful_shutdown=math.ceil(limits.timeout_s) + 5,
    )


def guarded_protocol(limits: ServeLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the header deadline, the header size limit and the shares of
    the connection cap of `limits`."""
    shares = ConnectionShares(limits.max_connections)

    class GuardedH11(H11Protocol):
        header_deadline: asyncio.TimerHandle | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.conn = HeadLimit(MAX_HEADER_BYTES)

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            admission = shares.opened(self, self.client[0] if self.client else "")
            if admission is Admission.CLOSED:
                log.warning("at %d connections, and %d more waiting for a 503: new ones are "
                            "closed at once", shares.cap, shares.over_cap)  # fmt: skip
                transport.close()
                return
            if admission is Admission.REFUSED:
                log.warning("at %d connections: new ones from the address holding the most "
                            "are answered 503", shares.cap)  # fmt: skip
                self.app = service_unavailable
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._note_request()
            if self.conn.their_state is not h11.IDLE:  # the headers are all in
                self._disarm()
            elif self.header_deadline is None:  # the first bytes of a request after an answer
                self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._note_request()

        def connection_lost(self, exc: Exception | None) -> None:
            shares.closed(self)
            self._disarm()
            super().connection_lost(exc)

        def evict(self) -> None:
            if not self.transport.is_closing():
                self.transport.close()

        def _note_request(self) -> None:
            """Tell the shares whether a request is under way (a pipelined one may have
            started as the last was answered)."""
            if self.cycle is not None and not self.cycle.response_complete:
                shares.busy(self)
            else:
                shares.idle(self)

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


class HeadLimit(h11.Connection):
    """h11's server side, refusing (as h11 refuses what it cannot parse) a request whose
    request line and headers are over `max_head_bytes`, also when they arrived whole."""

    def __init__(self, max_head_bytes: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.max_head_bytes = max_head_bytes

    def next_event(self) -> Any:
        event = super().next_event()
        if isinstance(event, h11.Request) and head_bytes(event) > self.max_head_bytes:
            raise h11.RemoteProtocolError("request headers too large", error_status_hint=431)
        return event


def head_bytes(request: h11.Request) -> int:
    """The size of `request`'s head as sent, but for spaces around header values."""
    line = len(request.method) + len(request.target) + len(b"  HTTP/1.1\r\n")
    fields = sum(len(name) + len(b": \r\n") + len(value) for name, value in request.headers)
    return line + fields + len(b"\r\n")

"""Each client address's share of the connections of `tfm serve`, so that one client holding
connections cannot keep the others out.

Below `cap` open connections, every new one is served. At the cap, a new connection is served
in place of one of the address that holds the most, when that address holds more than one
connection more than the newcomer's: its connection that has waited longest for a request (since
it opened, or since its last answer; one in the middle of an answer is never taken) is closed.
Otherwise the new connection is over the cap: up to `over_cap` of those wait for their request
to answer it 503 (uvicorn's plain text, as a client over a cap expects); beyond, they are
closed at once, so that they cannot take every file descriptor.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from typing import Protocol

OVER_CAP = 256  # connections over the cap that wait for their request, to answer it 503


class Connection(Hashable, Protocol):
    def evict(self) -> None:
        """Close the connection: another address needs its place."""


class Admission(enum.Enum):
    SERVED = "served"
    REFUSED = "answered 503"
    CLOSED = "closed at once"


class ConnectionShares:
    """The open connections by client address, and which of them wait for a request."""

    def __init__(self, cap: int, over_cap: int = OVER_CAP) -> None:
        self.cap, self.over_cap = cap, over_cap
        self.held: dict[str, set[Connection]] = {}  # address → its connections served
        self.waiting: dict[str, dict[Connection, None]] = {}  # longest waiting first
        self.address: dict[Connection, str] = {}
        self.refused: set[Connection] = set()  # over the cap, waiting for their 503

    @property
    def served(self) -> int:
        return len(self.address)

    def opened(self, connection: Connection, address: str) -> Admission:
        """How the new `connection` from `address` is treated (its place is taken at once)."""
        if self.served >= self.cap and not self._make_room(address):
            if len(self.refused) >= self.over_cap:
                return Admission.CLOSED
            self.refused.add(connection)
            return Admission.REFUSED
        self.address[connection] = address
        self.held.setdefault(address, set()).add(connection)
        self.waiting.setdefault(address, {})[connection] = None
        return Admission.SERVED

    def busy(self, connection: Connection) -> None:
        """`connection` is in the middle of a request: not to be taken."""
        address = self.address.get(connection)
        if address is not None:
            self.waiting[address].pop(connection, None)

    def idle(self, connection: Connection) -> None:
        """`connection` waits for a request (kept in its place if it was waiting already)."""
        address = self.address.get(connection)
        if address is not None:
            self.waiting[address].setdefault(connection, None)

    def closed(self, connection: Connection) -> None:
        """`connection` is gone (said again, nothing happens)."""
        self.refused.discard(connection)
        address = self.address.pop(connection, None)
        if address is None:
            return
        self.held[address].discard(connection)
        self.waiting[address].pop(connection, None)
        if not self.held[address]:
            del self.held[address], self.waiting[address]

    def _make_room(self, address: str) -> bool:
        """Close the longest waiting connection of the address that holds the most, if it
        holds more than one more than `address`; whether one was closed."""
        most = max(self.held, key=lambda holder: len(self.held[holder]))
        if len(self.held[most]) <= len(self.held.get(address, ())) + 1 or not self.waiting[most]:
            return False
        taken = next(iter(self.waiting[most]))
        self.closed(taken)
        taken.evict()
        return True

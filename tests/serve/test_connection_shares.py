"""Each client address's share of the connection cap: at the cap, a newcomer holding fewer
takes the place of the longest waiting connection of the address that holds the most (never one
in the middle of a request); one that cannot is answered 503, and beyond the connections that
may wait for their 503, closed at once."""

from __future__ import annotations

from tfm.serve.connection_shares import Admission, ConnectionShares


class Held:
    """A connection double that records being evicted."""

    def __init__(self, name: str) -> None:
        self.name, self.evicted = name, False

    def evict(self) -> None:
        self.evicted = True

    def __repr__(self) -> str:
        return self.name


def opened(shares: ConnectionShares, address: str, count: int) -> list[Held]:
    held = [Held(f"{address}#{i}") for i in range(count)]
    assert [shares.opened(c, address) for c in held] == [Admission.SERVED] * count
    return held


def test_at_the_cap_a_newcomer_takes_the_longest_waiting_place_of_the_biggest_holder():
    shares = ConnectionShares(4)
    many, few = opened(shares, "10.0.0.9", 3), opened(shares, "10.0.0.1", 1)
    shares.busy(many[0])  # in the middle of a request: not to be taken
    shares.busy(many[1])
    shares.idle(many[1])  # answered: it waits again, after those that waited already
    newcomer = Held("new")
    assert shares.opened(newcomer, "10.0.0.2") is Admission.SERVED
    assert [c.evicted for c in many] == [False, False, True]
    assert shares.served == 4 and shares.held["10.0.0.9"] == set(many[:2])
    shares.closed(many[2])  # its connection_lost comes later: nothing happens twice
    assert shares.served == 4
    assert shares.opened(Held("third"), "10.0.0.3") is Admission.SERVED  # 2 is over 0 + 1
    assert [c.evicted for c in many] == [False, True, True]  # the one answered, not the busy one
    even = Held("even")  # one each: nobody holds more than the newcomer would
    assert shares.opened(even, "10.0.0.4") is Admission.REFUSED
    assert not any(c.evicted for c in [many[0], *few, newcomer])


def test_an_address_that_holds_the_most_is_refused_then_closed_beyond_the_waiting_room():
    shares = ConnectionShares(3, over_cap=2)
    holder = opened(shares, "127.0.0.2", 3)
    over = [Held(f"over#{i}") for i in range(3)]
    answers = [shares.opened(c, "127.0.0.2") for c in over]
    assert answers == [Admission.REFUSED, Admission.REFUSED, Admission.CLOSED]
    shares.closed(over[0])  # answered its 503: room for another to wait
    assert shares.opened(Held("later"), "127.0.0.2") is Admission.REFUSED
    for connection in holder:  # every place busy: nobody's can be taken
        shares.busy(connection)
    assert shares.opened(Held("other"), "127.0.0.1") is Admission.CLOSED
    shares.closed(holder[0])
    assert shares.opened(Held("freed"), "127.0.0.1") is Admission.SERVED
    assert not any(c.evicted for c in holder)

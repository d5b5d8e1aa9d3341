"""What one request to `tfm serve` may ask for, how much the server takes on at once, and how
long a client may take: every limit defined once here, each one an option of `tfm serve`
(`--` and the field's name, dashes for underscores, without the `_s` of seconds).

Each limit is answered with a JSON error and its own status: a body, sentence count, sentence
length, token count or beam × tokens over its limit 413 (naming the option), as is a request
that would not be decoded within `timeout_s` even alone; a full queue 503 with Retry-After, as
is, at once, a request the work queued ahead would keep past `timeout_s`; a request not
answered in `timeout_s` 503. Connections that do not send a whole request within
`read_timeout_s` are closed (headers) or answered 408 (body).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TypeVar

T = TypeVar("T", int, float)

MAX_SERVE_BEAM = 16  # the beam one request may ask for: a wider one holds up everyone else


def _limit(default: T, minimum: T, help: str) -> T:
    """A limit: its default, its least value and the help of its option."""
    return field(default=default, metadata={"min": minimum, "help": help})


@dataclass(frozen=True, kw_only=True)
class ServeLimits:
    """The server's limits; the defaults suit one CPU machine serving a handful of users."""

    max_body_bytes: int = _limit(256 * 1024, 1, "Bytes of a request's body.")
    max_sentences: int = _limit(64, 1, "Sentences a request.")
    max_chars: int = _limit(1000, 1, "Characters a sentence.")
    max_tokens: int = _limit(
        4096, 1, "Source tokens a request (after BPE, each sentence with its `</s>`)."
    )
    max_beam_tokens: int = _limit(
        16384, 1, "Beam size × source tokens a request: the work it asks of the model."
    )
    max_queue: int = _limit(256, 1, "Requests waiting or being decoded; more are refused (503).")
    timeout_s: float = _limit(
        30.0,
        0.1,
        "Seconds a request may take before a 503; one that would take longer alone is "
        "refused (413), and one the work queued ahead would make late at once (503).",
    )
    batch_wait_ms: float = _limit(5.0, 0.0, "Milliseconds to gather requests into one batch.")
    batch_tokens: int = _limit(
        4000,
        1,
        "Beam size × source tokens in one batch: a heavy request is decoded in slices "
        "of this size, between which lighter requests go first.",
    )
    read_timeout_s: float = _limit(
        10.0,
        0.1,
        "Seconds a client has to send a request's headers, and again its body; "
        "connections that take longer are closed.",
    )
    keep_alive_s: int = _limit(5, 1, "Seconds an idle connection stays open after an answer.")
    max_connections: int = _limit(
        2048,
        1,
        "Open connections, shared between client addresses: at this many, a new one takes the "
        "place of an idle one of the address holding the most, or its request gets 503.",
    )

    def __post_init__(self) -> None:
        for limit in fields(self):
            value, minimum = getattr(self, limit.name), limit.metadata["min"]
            if value < minimum:
                raise ValueError(f"{limit.name}={value}: expected {minimum} or more")


def option_name(name: str) -> str:
    """The `tfm serve` option of the limit `name`: max_chars → --max-chars, timeout_s →
    --timeout."""
    return "--" + name.removesuffix("_s").replace("_", "-")

"""What one request to `tfm serve` may ask for, and how much the server takes on at once.

Each limit is answered with a JSON error and its own status: a body over `max_body_bytes`,
more than `max_sentences` sentences or a sentence over `max_chars` characters 413; a full
queue 503 with Retry-After; a request not answered in `timeout_s` 503.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_SERVE_BEAM = 16  # the beam one request may ask for: a wider one holds up everyone else
MAX_LENGTH_PENALTY = 10.0


@dataclass(frozen=True, kw_only=True)
class ServeLimits:
    """The server's limits; the defaults suit one CPU machine serving a handful of users."""

    max_body_bytes: int = 256 * 1024
    max_sentences: int = 64  # per request
    max_chars: int = 1000  # per sentence
    max_queue: int = 256  # requests waiting for the model worker
    timeout_s: float = 30.0  # from arrival to answer
    batch_wait_ms: float = 5.0  # how long the worker gathers requests into one batch
    batch_tokens: int = 4000  # source tokens in one batch, at most (one request may exceed it)

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_sentences", "max_chars", "max_queue", "batch_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: expected 1 or more")
        if self.timeout_s <= 0 or self.batch_wait_ms < 0:
            raise ValueError(
                f"timeout_s={self.timeout_s}, batch_wait_ms={self.batch_wait_ms}: "
                "expected a positive timeout and a wait of 0 or more"
            )

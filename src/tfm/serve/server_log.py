"""The log of `tfm serve`: what clients can cause many times is shown a few times, not once per
client, and nothing a request says is in it unless the operator asks (`--log-text`).

While the server runs, uvicorn's and asyncio's lines are routed into tfm's log, and every line
passes `RepeatLimit`: of each kind (the logger and the first line of the message, before its
values are filled in) at most `burst` lines a `window_s`; the count of those left out is added
to the next line of the kind in a later window, and given at the end. Only the first line of a
kind keeps its traceback; the later ones are one line, ending in the exception's type and text
(asyncio's "socket.accept() out of system resource" when file descriptors run out, say).
Lines logged with `extra=EVERY_LINE` are all shown: the one line a request of `--log-text`,
which the operator asked for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

ROUTED = ("uvicorn", "asyncio")  # loggers whose lines join tfm's while the server runs
EVERY_LINE = {"repeat_limit_exempt": True}  # `extra` of a line the limit must not leave out


@dataclass
class _Kind:
    start: float  # when the current window began
    shown: int = 0  # lines shown in the current window
    left_out: int = 0  # lines left out since the last one shown
    traced: bool = False  # a traceback of this kind was shown


class RepeatLimit(logging.Filter):
    """At most `burst` lines of a kind in `window_s`; the traceback of a kind once."""

    def __init__(
        self, *, burst: int = 5, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.burst, self.window_s, self.clock = burst, window_s, clock
        self.kinds: dict[tuple[str, str], _Kind] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        decided = getattr(record, "repeat_limit_shown", None)  # by this filter on another handler
        if decided is not None:
            return bool(decided)
        record.repeat_limit_shown = shown = self._shown(record)
        return shown

    def _shown(self, record: logging.LogRecord) -> bool:
        if getattr(record, "repeat_limit_exempt", False):
            return True
        now = self.clock()
        kind = self.kinds.setdefault(_key(record), _Kind(now))
        if now - kind.start >= self.window_s:
            kind.start, kind.shown = now, 0
        if kind.shown >= self.burst:
            kind.left_out += 1
            return False
        kind.shown += 1
        if record.exc_info and kind.traced:
            _one_line(record)
        kind.traced = kind.traced or bool(record.exc_info)
        if kind.left_out:
            record.msg, record.args = (
                f"{record.getMessage()} (and {kind.left_out} more like it)",
                None,
            )
            kind.left_out = 0
        return True

    def left_out(self) -> list[str]:
        """One line per kind with lines left out since its last one shown."""
        return [
            f"{kind.left_out} more log line(s) like {message!r} were left out"
            for (_, message), kind in self.kinds.items()
            if kind.left_out
        ]


@contextmanager
def limited_log() -> Iterator[RepeatLimit]:
    """uvicorn's and asyncio's lines in tfm's log, and every line of it through one
    `RepeatLimit`, until the block ends (which logs what was left out)."""
    limit = RepeatLimit()
    tfm = logging.getLogger("tfm")
    into = _Into(logging.getLogger("tfm.serve.http"))
    routed = [logging.getLogger(name) for name in ROUTED]
    before = [(logger, logger.propagate) for logger in routed]
    for handler in tfm.handlers:
        handler.addFilter(limit)
    for logger in routed:
        logger.addHandler(into)
        logger.propagate = False
    try:
        yield limit
    finally:
        for logger, propagate in before:
            logger.removeHandler(into)
            logger.propagate = propagate
        for line in limit.left_out():
            tfm.warning(line)
        for handler in tfm.handlers:
            handler.removeFilter(limit)


class _Into(logging.Handler):
    """Hands each record to `logger`'s handlers (and its parents')."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.logger = logger

    def emit(self, record: logging.LogRecord) -> None:
        self.logger.handle(record)


def _key(record: logging.LogRecord) -> tuple[str, str]:
    return record.name, str(record.msg).split("\n", 1)[0]


def _one_line(record: logging.LogRecord) -> None:
    """`record` without its traceback: the message's first line, the exception's type and
    text."""
    assert record.exc_info is not None
    kind, error = record.exc_info[0], record.exc_info[1]
    first = record.getMessage().split("\n", 1)[0]
    record.msg = f"{first}: {kind.__name__ if kind else 'error'}: {error}"
    record.args, record.exc_info, record.exc_text = None, None, None

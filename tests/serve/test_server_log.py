"""The log of `tfm serve`: a kind of line a client can cause many times is shown a few times a
minute, its traceback once, and the count of the lines left out is given; uvicorn's and
asyncio's lines go the same way while the server runs; `--log-text` has its line for every
request."""

from __future__ import annotations

import logging
import sys

from http_client import call, served

from tfm.serve.app import create_app
from tfm.serve.server_log import RepeatLimit, limited_log


def record(message: str, *args, name: str = "tfm.serve", error: Exception | None = None):
    exc_info = None
    if error is not None:
        try:
            raise error
        except Exception:
            exc_info = sys.exc_info()
    return logging.LogRecord(name, logging.ERROR, __file__, 1, message, args, exc_info)


def test_each_kind_of_line_is_shown_a_few_times_a_window_and_its_traceback_once():
    now = [0.0]
    limit = RepeatLimit(burst=2, window_s=60, clock=lambda: now[0])
    lines = [record("accept() failed on fd %d", fd, error=OSError(24, "Too many open files"))
             for fd in range(5)]  # fmt: skip
    shown = [line for line in lines if limit.filter(line)]
    assert shown == lines[:2]
    assert shown[0].exc_info is not None  # the first keeps its traceback
    assert shown[1].exc_info is None
    assert (
        shown[1].getMessage() == "accept() failed on fd 1: OSError: [Errno 24] Too many open files"
    )
    assert limit.left_out() == ["3 more log line(s) like 'accept() failed on fd %d' were left out"]
    other = record("another kind")
    assert limit.filter(other) and other.getMessage() == "another kind"
    now[0] = 61.0  # a new window: the next line says how many were left out
    later = record("accept() failed on fd %d", 9)
    assert limit.filter(later)
    assert later.getMessage() == "accept() failed on fd 9 (and 3 more like it)"
    assert limit.left_out() == []


def test_uvicorn_and_asyncio_lines_join_tfms_log_through_the_limit():
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            if self is handler:
                seen.append(record.getMessage())

    tfm = logging.getLogger("tfm")
    handler, second = Collect(), Collect()  # each line is counted once, not once a handler
    tfm.addHandler(handler)
    tfm.addHandler(second)
    try:
        with limited_log():
            for _ in range(8):
                logging.getLogger("uvicorn.error").warning("Invalid HTTP request received.")
            logging.getLogger("asyncio").error("socket.accept() out of system resource")
        logging.getLogger("uvicorn.error").warning("after the server")
    finally:
        tfm.removeHandler(handler)
        tfm.removeHandler(second)
    assert seen == ["Invalid HTTP request received."] * 5 + [
        "socket.accept() out of system resource",
        "3 more log line(s) like 'Invalid HTTP request received.' were left out",
    ]


def test_log_text_has_one_line_for_every_request_however_many(held):
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    held.release.set()
    tfm = logging.getLogger("tfm")
    handler = Collect(level=logging.INFO)
    tfm.addHandler(handler)
    before = tfm.level
    tfm.setLevel(logging.INFO)
    try:
        with limited_log(), served(create_app(held, log_text=True)) as base:
            for i in range(8):  # more than the 5 a minute of a kind of line
                call(base, "POST", "/translate", {"sentences": [f"line {i}"]})
    finally:
        tfm.removeHandler(handler)
        tfm.setLevel(before)
    said = [line for line in lines if line.startswith("translate: ")]
    assert said == [f'translate: ["line {i}"] -> ["LINE {i}"]' for i in range(8)]

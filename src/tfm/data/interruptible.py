"""Long native routines run so that SIGINT and SIGTERM still stop tfm within a moment.

Python runs a signal handler only between bytecodes of the main thread, so a long call into native
code (the Rust BPE trainer of `tokenizers` runs for minutes on a big corpus) delays Ctrl-C and
`kill` until it returns. `interruptibly(work)` runs `work()` in a forked worker process while
this process waits in short slices: a signal handler's exception (KeyboardInterrupt) ends the
wait at once, and the worker is killed. (A worker thread would not do: the process could stop
waiting, but it cannot stop the thread, which slows its exit by seconds.)

The worker ignores SIGINT and SIGTERM (the parent decides), dies with its parent, and sends back
its result or exception and the log records it made, which the parent logs as its own. Where
`fork` is not available, `work()` runs in this process.

The worker is forked with the garbage collector's objects frozen: a forked copy of this process has
none of its threads, so a native object that owns a thread pool (a CTranslate2 translator, say)
hangs forever if the worker's collector finalizes it. Everything inherited, garbage included, is
frozen out of the worker collector's sight; this process collects its own garbage later, as
usual. (No collection before the fork: in a process with torch loaded, a full collection takes a
large part of the second that preparing a small corpus takes.)
"""

from __future__ import annotations

import ctypes
import gc
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TypeVar

from tfm.errors import TfmError

T = TypeVar("T")
POLL_S = 0.1  # how often the waiting process lets signal handlers run
_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a child gets when its parent dies


def interruptibly(work: Callable[[], T]) -> T:
    """`work()`'s result (or exception) from a worker process; see the module docstring."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return work()
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    worker = context.Process(target=_work, args=(work, sender), daemon=True)
    gc.freeze()  # see the module docstring
    try:
        worker.start()
    finally:
        gc.unfreeze()
    sender.close()
    try:
        while not receiver.poll(POLL_S):
            if not worker.is_alive() and not receiver.poll(0):
                raise TfmError(f"the worker process ended with exit code {worker.exitcode}")
        records, kind, value = receiver.recv()
    finally:
        if worker.is_alive():
            worker.kill()
        worker.join()
        receiver.close()
    for record in records:
        logging.getLogger(record.name).handle(record)
    if kind == "error":
        raise value
    return value


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        record.msg, record.args = record.getMessage(), None  # plain text: it is pickled
        record.exc_info = None
        self.records.append(record)


def _work(work: Callable[[], object], sender: Connection) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the parent is gone already
        os._exit(1)
    logger = logging.getLogger("tfm")
    collect = _Collect()
    logger.handlers = [collect]
    try:
        outcome: tuple[str, object] = ("result", work())
    except BaseException as exc:  # handed to the parent, raised there
        outcome = ("error", exc)
    sender.send((collect.records, *outcome))
    sender.close()

"""The run's own log: every line `tfm train` logs, also in `run_dir/train.log`.

Training must not depend on stderr: a terminal that closes, a `| head` that stops reading or a
`tee` that dies takes stderr away, and the run goes on (the CLI drops what it cannot show there).
`train.log` keeps every line, each prefixed with its time, so that nothing logged is lost.

`collect_run_log()` starts collecting before the run directory may be written (the config, data
and device checks come first), `start_run_log(root)` opens `root/train.log` once the run's
session has prepared the directory and writes the lines collected so far, and the context's
exit closes it. A resumed run appends to the file; `--overwrite` starts it again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from tfm.errors import TfmError

LOG_FILE = "train.log"
_FORMAT = logging.Formatter("%(asctime)s %(message)s", datefmt="%Y-%m-%d %H:%M:%S")


class RunLogHandler(logging.Handler):
    """Holds the records logged before the run directory is ready, then appends them and every
    later one to train.log (flushed line by line, so that a killed run keeps its log)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(_FORMAT)
        self.pending: list[logging.LogRecord] = []
        self.file: TextIO | None = None

    def open(self, path: Path) -> None:
        if self.file is not None:
            return
        self.file = path.open("a", encoding="utf-8")
        for record in self.pending:
            self._write(record)
        self.pending.clear()

    def emit(self, record: logging.LogRecord) -> None:
        if self.file is None:
            self.pending.append(record)
        else:
            self._write(record)

    def _write(self, record: logging.LogRecord) -> None:
        assert self.file is not None
        try:
            self.file.write(self.format(record) + "\n")
            self.file.flush()
        except OSError:  # a full disk must not stop training: the checkpoints say so themselves
            pass

    def close(self) -> None:
        self.acquire()  # not while another thread writes (a signal's warning, train.py)
        try:
            if self.file is not None:
                self.file.close()
                self.file = None
        finally:
            self.release()
        super().close()


@contextlib.contextmanager
def collect_run_log() -> Iterator[RunLogHandler]:
    """Collect tfm's log records for train.log while the body runs; an error that ends the run
    (a `TfmError`, which the CLI prints) is written to train.log as well."""
    handler = RunLogHandler()
    logger = logging.getLogger("tfm")
    logger.addHandler(handler)
    try:
        yield handler
    except TfmError as exc:
        if handler.file is not None:
            handler.emit(logging.makeLogRecord({"msg": f"error: {exc}", "levelno": 40}))
        raise
    finally:
        logger.removeHandler(handler)
        handler.close()


def start_run_log(root: Path) -> None:
    """Open `root/train.log` for the run log being collected, if any (see the module
    docstring); the directory exists. Where run logs are collected one inside another (a
    back-translation run's reverse run inside it), the innermost is this run's."""
    for handler in reversed(logging.getLogger("tfm").handlers):
        if isinstance(handler, RunLogHandler):
            handler.open(root / LOG_FILE)
            return

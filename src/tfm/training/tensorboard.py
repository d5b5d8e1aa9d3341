"""TensorBoard event files beside metrics.jsonl: `run_dir/tensorboard/`, one scalar per number of
each metrics event (train_loss, lr, tokens_per_s, val_loss, val_bleu, …) at its step.

    tensorboard --logdir runs/toy/tensorboard

On by default (`train.tensorboard`) when the `tensorboard` package is installed
(`pip install -e ".[tensorboard]"`); without it training says so once and goes on. Written by
process 0 only, through `torch.utils.tensorboard.SummaryWriter`, flushed after each event (one a
log window) so that TensorBoard shows it at once. The writer opens with the first event, so a run
that fails before its first step leaves no folder. A resumed run's writer is given `purge_step`,
the step after its checkpoint's: TensorBoard drops the events logged from there on by the run
that was cut short, as metrics.jsonl does. TensorBoard reads a folder's files in name order and a
name starts with the second it was opened in, so a resumed writer opens only once the clock is
past the second of every file already there (a wait of at most one second, when a run is
resumed at once). A write that fails (a full disk) is one warning, not
the writer thread's traceback too, and training goes on without event files.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FOLDER = "tensorboard"
NOT_SCALARS = ("step", "epoch")


class TensorBoardLog:
    """Scalars of metrics events into an event file in `directory`; `resumed_at`: the step a
    resumed run goes on from (None for a new run)."""

    def __init__(self, directory: Path, *, resumed_at: int | None) -> None:
        self.directory, self.resumed_at = directory, resumed_at
        self._writer: Any = None  # a SummaryWriter, from the first event
        self._failed = False

    def write(self, event: dict) -> None:
        """Append `event`'s numbers as scalars at its step (nothing once a write has failed)."""
        if self._failed:
            return
        try:
            if self._writer is None:
                from torch.utils.tensorboard import SummaryWriter

                _quiet_writer_threads()
                purge = None if self.resumed_at is None else self.resumed_at + 1
                if purge is not None:
                    _past_existing_files(self.directory)
                self._writer = SummaryWriter(str(self.directory), purge_step=purge)
            for key, value in event.items():
                number = isinstance(value, int | float) and not isinstance(value, bool)
                if number and key not in NOT_SCALARS:
                    self._writer.add_scalar(key, value, global_step=event["step"])
            self._writer.flush()
        except OSError as exc:
            self._failed = True
            log.warning("TensorBoard files: cannot write to %s (%s); training goes on without "
                        "them", self.directory, exc.strerror or exc)  # fmt: skip
            self.close()

    def close(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except OSError:  # the failed write was reported already
                pass
        self._writer = None


class _QuietWriterThreads:
    """`threading.excepthook` that leaves out the OSErrors of tensorboard's writer threads: such
    a thread reports a failed write twice, to the next call (which `TensorBoardLog.write` turns
    into one warning) and as a traceback on stderr. Every other exception goes to `previous`."""

    def __init__(self, previous: Callable[[threading.ExceptHookArgs], object]) -> None:
        self.previous = previous

    def __call__(self, args: threading.ExceptHookArgs) -> None:
        ours = type(args.thread).__module__.startswith("tensorboard.")
        if not (ours and isinstance(args.exc_value, OSError)):
            self.previous(args)


def _past_existing_files(directory: Path) -> None:
    """Wait until the clock's second is later than that of every event file in `directory`
    (`events.out.tfevents.<second>.<host>…`), so that a new file sorts after them; a file
    stamped later than now (another machine's clock) is not waited for."""
    seconds = [
        int(stamp)
        for path in directory.glob("events.out.tfevents.*")
        if (stamp := path.name.split(".")[3]).isdigit()
    ]
    if seconds:
        wait = max(seconds) + 1 - time.time()
        if 0 < wait <= 1:
            time.sleep(wait)


def _quiet_writer_threads() -> None:
    if not isinstance(threading.excepthook, _QuietWriterThreads):
        threading.excepthook = _QuietWriterThreads(threading.excepthook)


def open_tensorboard(
    run_dir: Path, *, enabled: bool, resumed_at: int | None
) -> TensorBoardLog | None:
    """The run's TensorBoard log, or None when `train.tensorboard` is off or the `tensorboard`
    package is missing (said once, at INFO)."""
    if not enabled:
        return None
    if importlib.util.find_spec("tensorboard") is None:
        log.info(
            "no TensorBoard event files: the tensorboard package is not installed "
            "(pip install tensorboard, or set train.tensorboard: false to silence this)"
        )
        return None
    return TensorBoardLog(run_dir / FOLDER, resumed_at=resumed_at)

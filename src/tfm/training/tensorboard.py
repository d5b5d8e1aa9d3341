"""TensorBoard event files beside metrics.jsonl: `run_dir/tensorboard/`, one scalar per number of
each metrics event (train_loss, lr, tokens_per_s, val_loss, val_bleu, …) at its step.

    tensorboard --logdir runs/toy/tensorboard

On by default (`train.tensorboard`) when the `tensorboard` package is installed
(`pip install -e ".[tensorboard]"`); without it training says so once and goes on. Written by
process 0 only, in the format `torch.utils.tensorboard.SummaryWriter` writes (its `scalar`
summaries, tensorboard's record writer), but synchronously: SummaryWriter writes from a thread
of its own, whose failure on a full disk is a traceback on stderr and lost events, while here a
failed write is one warning and training goes on without event files. The file opens with the
first event, so a run that fails before its first step leaves no folder. A resumed run starts a
new file that tells TensorBoard to drop the events logged after its checkpoint's step, as
metrics.jsonl does (SummaryWriter's `purge_step`).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import time
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

FOLDER = "tensorboard"
NOT_SCALARS = ("step", "epoch")


class TensorBoardLog:
    """Scalars of metrics events into an event file in `directory`; `resumed_at`: the step a
    resumed run goes on from (None for a new run)."""

    def __init__(self, directory: Path, *, resumed_at: int | None) -> None:
        self.directory, self.resumed_at = directory, resumed_at
        self._file: IO[bytes] | None = None
        self._records: Any = None
        self._failed = False

    def write(self, event: dict) -> None:
        """Append `event`'s numbers as scalars at its step (nothing once a write has failed)."""
        if self._failed:
            return
        from tensorboard.compat.proto.summary_pb2 import Summary
        from torch.utils.tensorboard.summary import scalar

        values = [
            scalar(key, value).value[0]
            for key, value in event.items()
            if key not in NOT_SCALARS and isinstance(value, int | float)
            and not isinstance(value, bool)
        ]  # fmt: skip
        try:
            if self._records is None:
                self._open()
            self._append(step=event["step"], summary=Summary(value=values))
        except OSError as exc:
            self._failed = True
            log.warning("TensorBoard files: cannot write to %s (%s); training goes on without "
                        "them", self.directory, exc.strerror or exc)  # fmt: skip
            self.close()

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        from tensorboard.summary.writer.record_writer import RecordWriter

        name = f"events.out.tfevents.{time.time():.0f}.{socket.gethostname()}.{os.getpid()}.0"
        self._file = open(self.directory / name, "ab")  # closed by close()
        self._records = RecordWriter(self._file)
        self._append(step=self.resumed_at or 0, file_version="brain.Event:2")
        if self.resumed_at is not None:  # TensorBoard drops the events from this step on
            from tensorboard.compat.proto.event_pb2 import SessionLog

            self._append(step=self.resumed_at + 1, session_log=SessionLog(status=SessionLog.START))

    def _append(self, **fields: Any) -> None:
        from tensorboard.compat.proto.event_pb2 import Event

        self._records.write(Event(wall_time=time.time(), **fields).SerializeToString())
        self._records.flush()

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:  # the failed flush was reported already
                pass
        self._file = self._records = None


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

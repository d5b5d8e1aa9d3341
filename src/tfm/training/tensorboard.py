"""TensorBoard event files beside metrics.jsonl: `run_dir/tensorboard/`, one scalar per number of
each metrics event (train_loss, lr, tokens_per_s, val_loss, val_bleu, …) at its step.

    tensorboard --logdir runs/toy/tensorboard

On by default (`train.tensorboard`) when the `tensorboard` package is installed
(`pip install -e ".[tensorboard]"`); without it training says so once and goes on. Written
through `torch.utils.tensorboard.SummaryWriter` by process 0 only. The writer opens with the
first event, so a run that fails before its first step leaves no folder. A resumed run drops the
events logged after its checkpoint's step (the writer's `purge_step`), as metrics.jsonl does.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

log = logging.getLogger(__name__)

FOLDER = "tensorboard"
NOT_SCALARS = ("step", "epoch")


class TensorBoardLog:
    """Scalars of metrics events into `directory`; `resumed_at`: the step a resumed run goes on
    from (None for a new run)."""

    def __init__(self, directory: Path, *, resumed_at: int | None) -> None:
        self.directory, self.resumed_at = directory, resumed_at
        self._writer: SummaryWriter | None = None

    def write(self, event: dict) -> None:
        writer = self._writer
        if writer is None:
            from torch.utils.tensorboard import SummaryWriter

            purge = None if self.resumed_at is None else self.resumed_at + 1
            writer = SummaryWriter(str(self.directory), purge_step=purge, flush_secs=30)
            self._writer = writer
        step = event["step"]
        for key, value in event.items():
            is_number = isinstance(value, int | float) and not isinstance(value, bool)
            if key not in NOT_SCALARS and is_number:
                writer.add_scalar(key, value, step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def open_tensorboard(
    run_dir: Path, *, enabled: bool, resumed_at: int | None
) -> TensorBoardLog | None:
    """The run's TensorBoard log, or None when `train.tensorboard` is off or the `tensorboard`
    package is missing (said once, at INFO)."""
    if not enabled:
        return None
    if importlib.util.find_spec("tensorboard") is None:  # what SummaryWriter needs
        log.info(
            "no TensorBoard event files: the tensorboard package is not installed "
            "(pip install tensorboard, or set train.tensorboard: false to silence this)"
        )
        return None
    return TensorBoardLog(run_dir / FOLDER, resumed_at=resumed_at)

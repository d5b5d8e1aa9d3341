"""What training shows on stderr as it goes: a progress bar on a terminal, plain lines elsewhere.

On a terminal, a tqdm bar with the steps planned, the speed and, after each `train.log_every`
window, its loss, learning rate and tokens per second. When stderr is a file or a pipe, a bar
would write carriage-return fragments and padding; instead each log window's figures become one
ordinary log line, at most one every `LINE_INTERVAL_S` seconds (and always the first):

    step 150/860 (epoch 1): loss 4.512, lr 7.50e-04, 3,012 tokens/s, 0:01:12 elapsed, ~0:05:40 left
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import timedelta
from typing import TextIO

from tqdm import tqdm

log = logging.getLogger(__name__)

LINE_INTERVAL_S = 30.0


class TrainingProgress:
    """The bar or the lines of one training run, from step `initial` towards `total` (None:
    unknown). Shows nothing when not `enabled` (--no-progress, or a process other than the
    first under torchrun)."""

    def __init__(
        self, *, total: int | None, initial: int, enabled: bool, stream: TextIO | None = None
    ) -> None:
        stream = sys.stderr if stream is None else stream
        self.total, self.initial = total, initial
        self.lines = enabled and not _is_terminal(stream)
        self.bar = tqdm(
            total=total,
            initial=initial,
            disable=not enabled or self.lines,
            unit="step",
            dynamic_ncols=True,
            leave=False,
            file=stream,
        )
        self.started = time.monotonic()
        self.last_line: float | None = None

    def update(self) -> None:
        """One more step done."""
        self.bar.update(1)

    def retotal(self, total: int | None) -> None:
        """The run re-planned its length: `total` steps."""
        if total != self.total:
            self.total = self.bar.total = total
            self.bar.refresh()

    def window(self, event: dict) -> None:
        """A log window's training event (step, epoch, train_loss, lr, tokens_per_s)."""
        if not self.lines:
            self.bar.set_postfix(
                loss=f"{event['train_loss']:.3f}",
                lr=f"{event['lr']:.2e}",
                tok_s=f"{event['tokens_per_s']:.0f}",
            )
            return
        now = time.monotonic()
        if self.last_line is not None and now - self.last_line < LINE_INTERVAL_S:
            return
        self.last_line = now
        log.info("%s", self.line(event, now - self.started))

    def line(self, event: dict, elapsed_s: float) -> str:
        """The plain line for `event`, `elapsed_s` seconds after this process started training."""
        step = event["step"]
        of = f"/{self.total}" if self.total else ""
        text = (
            f"step {step}{of} (epoch {event['epoch'] + 1}): loss {event['train_loss']:.3f}, "
            f"lr {event['lr']:.2e}, {event['tokens_per_s']:,.0f} tokens/s, "
            f"{_clock(elapsed_s)} elapsed"
        )
        done = step - self.initial
        if self.total and done > 0 and step < self.total:
            text += f", ~{_clock(elapsed_s / done * (self.total - step))} left"
        return text

    def close(self) -> None:
        self.bar.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=round(seconds)))

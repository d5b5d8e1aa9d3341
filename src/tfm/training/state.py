"""Everything a run needs to continue exactly where it stopped, as plain checkpointable values."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

import torch


@dataclass
class LogWindow:
    """The training steps since the last `train_loss` line of metrics.jsonl (`train.log_every`).

    Saved with the progress, so that a run resumed at a step between two lines logs the same
    mean loss as the uninterrupted run. `seconds` counts training time only (validation and
    checkpoints left out), so `tokens / seconds` is the training speed over the window.
    """

    loss_sum: float = 0.0  # of the steps' mean token losses
    steps: int = 0  # steps with a finite loss
    tokens: int = 0  # real target tokens of those steps
    seconds: float = 0.0

    def add(self, loss: float, tokens: int) -> None:
        self.loss_sum += loss
        self.steps += 1
        self.tokens += tokens


@dataclass
class Progress:
    """Where training is: counters, the data position and the early-stopping record.

    `position` is the index of the next batch inside `epoch`'s batch list (`sampler.epoch(epoch)`),
    so a resumed run continues with exactly the batches the uninterrupted run would have seen.
    """

    step: int = 0
    epoch: int = 0
    position: int = 0
    elapsed_s: float = 0.0
    best_score: float | None = None
    best_step: int | None = None
    validations_without_gain: int = 0
    nonfinite_in_a_row: int = 0
    nonfinite_total: int = 0
    tokens_seen: int = 0
    log_window: LogWindow = field(default_factory=LogWindow)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> Progress:
        """The progress a checkpoint saved; one written before the log window was saved starts
        an empty window."""
        values = dict(values)
        window = LogWindow(**values.pop("log_window", {}))
        return cls(**values, log_window=window)


def rng_state() -> dict:
    """All random number generator states a step can consume (torch CPU/CUDA, Python)."""
    state = {"torch": torch.get_rng_state(), "python": _python_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _python_state() -> list:
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]

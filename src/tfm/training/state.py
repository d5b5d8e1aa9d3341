"""Everything a run needs to continue exactly where it stopped, as plain checkpointable values,
and the steps whose results are still on the device (`UnreadSteps`)."""

from __future__ import annotations

import logging
import random
from dataclasses import asdict, dataclass, field

import torch

from tfm.errors import TrainingError

log = logging.getLogger(__name__)


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
    flops: int = 0  # model FLOPs of those steps on this process (training/utilisation.py)

    def add(self, loss: float, tokens: int, flops: int = 0) -> None:
        self.loss_sum += loss
        self.steps += 1
        self.tokens += tokens
        self.flops += flops


@dataclass
class StepPlan:
    """A run's length and decay where they differ from its config's: the last step (`end`), the
    cosine decay's progress `decay_done` at step `decay_from` (`schedule.Decay`), the checkpoint
    cadence, and whether the run is cooling down to a validation-based stop."""

    end: int
    decay_from: int
    decay_done: float = 0.0
    checkpoint_every: int | None = None
    cooling: bool = False


@dataclass
class ClockState:
    """What a run planned by a time budget measures to re-plan (`training/clock.py`): the
    budget, the most steps the corpus is worth, the seconds of a step and of a validation as
    last measured, the step and elapsed time the next measurement starts from and the
    validating seconds since then, whether the checkpoint cadence follows the plan, and how
    many times it re-planned."""

    budget_s: float
    ceiling: int | None
    step_s: float
    validation_s: float
    mark_step: int = 0
    mark_elapsed: float = 0.0
    validating_s: float = 0.0
    checkpoints_follow: bool = True
    replans: int = 0


@dataclass
class Progress:
    """Where training is: counters, the data position, the early-stopping record, and a
    re-planned length (`plan`) with the clock it follows (`clock`), when there is one.

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
    plan: StepPlan | None = None
    clock: ClockState | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> Progress:
        """The progress a checkpoint saved; one written before the log window was saved starts
        an empty window."""
        values = dict(values)
        window = LogWindow(**values.pop("log_window", {}))
        plan, clock = values.pop("plan", None), values.pop("clock", None)
        return cls(
            **values,
            log_window=window,
            plan=StepPlan(**plan) if plan else None,
            clock=ClockState(**clock) if clock else None,
        )


@dataclass(frozen=True)
class DeviceStep:
    """One step's outcome as it lies on the device: `loss` its mean token loss (a float64
    scalar) and `finite` whether its loss and gradient were finite (a bool scalar; the update
    was skipped where not). `tokens` (real target tokens), `lr` and `flops` are the host's own."""

    step: int
    lr: float
    tokens: int
    loss: torch.Tensor
    finite: torch.Tensor
    flops: int = 0  # model FLOPs of this process's batches


class UnreadSteps:
    """The steps taken since the host last read their outcomes from the device.

    Reading a value back from a GPU waits for all the work queued before it, so a step that read
    its loss would stall the GPU once per step. The training step leaves its outcome here instead;
    `read` fetches every unread step's loss and finiteness in one transfer and books them into the
    progress in step order, exactly as if each step had been read as it finished: the log
    window's loss and tokens, `tokens_seen`, and the counts of non-finite (skipped) steps, which
    are logged, and stop training with a TrainingError after `max_nonfinite` in a row.
    """

    def __init__(self) -> None:
        self.steps: list[DeviceStep] = []

    def add(self, step: DeviceStep) -> None:
        self.steps.append(step)

    def read(self, progress: Progress, *, max_nonfinite: int) -> None:
        if not self.steps:
            return
        steps, self.steps = self.steps, []
        pairs = torch.stack([torch.stack([s.loss, s.finite.to(s.loss.dtype)]) for s in steps])
        for s, (loss, finite) in zip(steps, pairs.tolist(), strict=True):  # one transfer
            if finite:
                progress.log_window.add(loss, s.tokens, s.flops)
                progress.tokens_seen += s.tokens
                progress.nonfinite_in_a_row = 0
            else:
                _skipped(progress, s, max_nonfinite=max_nonfinite, read_at=steps[-1].step)


def _skipped(progress: Progress, s: DeviceStep, *, max_nonfinite: int, read_at: int) -> None:
    """Count a non-finite step (its update was skipped); stop when too many came in a row."""
    progress.nonfinite_in_a_row += 1
    progress.nonfinite_total += 1
    log.warning("step %d: non-finite loss or gradient (lr %.3g); update skipped", s.step, s.lr)
    if progress.nonfinite_in_a_row >= max_nonfinite:
        read = f" (read at step {read_at})" if read_at != s.step else ""
        raise TrainingError(
            f"training stopped at step {s.step}{read}: {progress.nonfinite_in_a_row} non-finite "
            f"losses in a row (lr {s.lr:.3g}); try a lower train.lr, more train.warmup_steps, "
            "train.clip_norm, or train.precision: fp32"
        )


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

"""A training session: the run's data, model, optimizer and progress, its plan as it goes
(`clock`), and their saving. `session_opening.open_session` builds one for a new run or a resumed
one; the resume policy (`resume_policy`), the run directory (`run_preparation`), validation
(`validation`) and the step (`step`) live beside it.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from tfm.config import Config, planned
from tfm.data.epochs import EpochPlan
from tfm.data.pipeline import EncodedSplit, RelatedValidation
from tfm.data.tokenizer import Tokenizer
from tfm.device import autocast
from tfm.errors import TrainingError
from tfm.rundir.checkpoint import NonFiniteStateError
from tfm.rundir.metrics import append_event
from tfm.rundir.model_file import on_cpu, save_model
from tfm.rundir.paths import RunPaths
from tfm.rundir.store import CheckpointStore
from tfm.training.clock import Clock
from tfm.training.resume_policy import RunIdentity
from tfm.training.schedule import configured_decay, rate_at
from tfm.training.state import Progress, UnreadSteps, rng_state
from tfm.training.tensorboard import TensorBoardLog
from tfm.transformer import ModelArgs, Transformer

log = logging.getLogger(__name__)


@dataclass
class StopFlag:
    """Set by a signal handler; the loop finishes its step, checkpoints and returns. Before
    `training` (preparing the data, the tokenizer, the model) there is nothing to save, and the
    handler stops at once."""

    signal_name: str | None = None
    training: bool = False  # set once training can stop cleanly; before, a signal stops at once

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def request(self, signum: int) -> None:
        self.signal_name = signal.Signals(signum).name


@dataclass
class Session:
    config: Config
    paths: RunPaths
    device: torch.device
    dtype: torch.dtype
    tokenizer: Tokenizer
    validation_split: EncodedSplit
    model: Transformer
    model_args: ModelArgs
    optimizer: torch.optim.Optimizer
    epochs: EpochPlan  # the training split, and what each epoch trains on
    store: CheckpointStore
    data_fingerprint: str
    world_size: int = 1  # processes training together (torchrun); see training/distributed.py
    # the related pairs' own validation splits, scored beside the main pair's (process 0's)
    related_validations: list[RelatedValidation] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)
    saved_step: int = -1
    saved_epoch: int = -1  # the epoch the newest checkpoint's progress is in
    saved_score: float | None = None  # and its validation score
    validated_step: int = -1
    resumed_from: Path | None = None
    warned_at: dict[str, int] = field(default_factory=dict)  # finding kind -> step of its advice
    last_validation: dict | None = None  # the newest validation's metrics event
    last_findings: tuple[str, ...] = ()  # and the kinds of degeneration it showed (diagnostics)
    tensorboard: TensorBoardLog | None = None  # process 0's event files, when on
    unread: UnreadSteps = field(default_factory=UnreadSteps)  # steps still on the device
    # Read each step's outcome as it ends (free where the host computes, as on a CPU), or only
    # when the loop needs it: log lines, validations, checkpoints (a GPU runs ahead meanwhile).
    read_each_step: bool = True
    # The run's elapsed seconds now (the training loop's clock), so that a checkpoint counts the
    # validation it ends; None outside the loop.
    now: Callable[[], float] | None = None

    @property
    def train_split(self) -> EncodedSplit:
        return self.epochs.split

    def autocast(self):
        return autocast(self.device, self.dtype)

    @property
    def clock(self) -> Clock:
        """The run's re-planning (`training/clock.py`), over its progress."""
        t = self.config.train
        return Clock(self.progress, configured=configured_decay(self.config), steps=t.max_steps,
                     warmup=planned(t.warmup_steps, "train.warmup_steps"),
                     validate_every=self.validate_every)  # fmt: skip

    @property
    def validate_every(self) -> int:
        return planned(self.config.train.validate_every, "train.validate_every")

    @property
    def max_steps(self) -> int | None:
        """The planned last step: as re-planned, else the config's step budget."""
        return self.clock.end

    @property
    def checkpoint_every(self) -> int | None:
        plan = self.progress.plan
        if plan is not None and plan.checkpoint_every is not None:
            return plan.checkpoint_every
        return self.config.train.checkpoint_every

    def rate(self, step: int) -> float:
        """The learning rate of optimizer step `step`, with the decay as (re-)planned."""
        return rate_at(step, self.config, self.clock.decay)

    def read_steps(self) -> None:
        """Book the unread steps' outcomes into the progress (see `UnreadSteps`)."""
        self.unread.read(self.progress, max_nonfinite=self.config.train.max_nonfinite)

    def write_metrics(self, event: dict) -> None:
        """Append `event` to metrics.jsonl (and the TensorBoard event files, when on)."""
        append_event(self.paths.metrics, event)
        if self.tensorboard is not None:
            self.tensorboard.write(event)

    def close_tensorboard(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()

    def identity(self) -> RunIdentity:
        """What the resume policy compares with a checkpoint's."""
        return RunIdentity(
            config=self.config.model_dump(mode="json"),
            tokenizer_fingerprint=self.tokenizer.fingerprint(),
            data_fingerprint=self.data_fingerprint,
            world_size=self.world_size,
        )

    def state(self) -> dict:
        self.read_steps()
        identity = self.identity()
        return {
            "kind": "train_state",
            "model": on_cpu(self.model.state_dict()),
            "optimizer": self.optimizer.state_dict(),
            "progress": self.progress.to_dict(),
            "rng": rng_state(),
            "config": identity.config,
            "model_args": asdict(self.model_args),
            "tokenizer_fingerprint": identity.tokenizer_fingerprint,
            "data_fingerprint": identity.data_fingerprint,
            "world_size": identity.world_size,
        }

    def save_checkpoint(self, score: float | None) -> None:
        """Write the full training state and last.pt (both atomically)."""
        if self.now is not None:
            self.progress.elapsed_s = self.now()
        state = self.state()
        with self._diverged():
            self.store.save(state, step=self.progress.step, score=score, protect=self.resumed_from)
        self.save_model(self.paths.last)
        self.saved_step, self.saved_epoch = self.progress.step, self.progress.epoch
        self.saved_score = score

    def save_model(self, path: Path) -> None:
        """The model alone (best.pt, last.pt), with its shape and tokenizer fingerprint."""
        with self._diverged():
            save_model(
                path,
                self.model,
                asdict(self.model_args),
                step=self.progress.step,
                tokenizer_fingerprint=self.tokenizer.fingerprint(),
            )

    @contextlib.contextmanager
    def _diverged(self) -> Iterator[None]:
        """A state that is not finite (nothing was written) ends training with what the user can
        do: resume from the newest checkpoint when there is one, else start again."""
        try:
            yield
        except NonFiniteStateError as exc:
            if self.saved_step >= 0:
                advice = (
                    f"resume from the checkpoint of step {self.saved_step} (--resume) with a "
                    "lower train.lr"
                )
            else:
                advice = "no checkpoint was written before it: start again with a lower train.lr"
            raise TrainingError(f"{exc}; training diverged: {advice}") from None

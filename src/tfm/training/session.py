"""A training session: the run's data, model, optimizer and progress, and their saving and
restoring. `open_session` builds one for a new run or a resumed one; the resume policy
(`resume_policy`), the run directory (`run_preparation`), validation (`validation`) and the step
(`step`) live beside it.
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
from tfm.data.cache.prepared_cache import training_splits
from tfm.data.epochs import EpochPlan
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import PAD_ID, Tokenizer
from tfm.device import autocast, precision_name, select_device, training_precision
from tfm.errors import TrainingError, UsageError
from tfm.rundir.checkpoint import NonFiniteStateError
from tfm.rundir.manifest import TOKENIZER_FILE, check_manifest, record_manifest
from tfm.rundir.metrics import append_event
from tfm.rundir.model_file import on_cpu, save_model
from tfm.rundir.paths import RunPaths
from tfm.rundir.store import CheckpointStore, LoadedCheckpoint
from tfm.threads import use_threads
from tfm.training.clock import Clock
from tfm.training.recipe.memory import check_fits
from tfm.training.resume_policy import (
    OPTIMIZER_KEYS,
    RunIdentity,
    judge_resume,
    optimizer_changes,
)
from tfm.training.run_log import start_run_log
from tfm.training.run_plan import resumed_clock, starting_plan, write_plan
from tfm.training.run_preparation import check_run_dir, create_run_dir, record_opened_run
from tfm.training.schedule import build_optimizer, configured_decay, rate_at
from tfm.training.start_log import log_start
from tfm.training.state import Progress, UnreadSteps, restore_rng_state, rng_state
from tfm.training.tensorboard import TensorBoardLog, open_tensorboard
from tfm.training.utilisation import describe as describe_flops
from tfm.transformer import ModelArgs, Transformer, build_model

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

    def restore(self, checkpoint: LoadedCheckpoint) -> None:
        """Continue from `checkpoint`, or raise UsageError when the resume policy refuses it."""
        path, state = checkpoint.path, checkpoint.state
        data_fingerprint = state["data_fingerprint"]
        if (
            data_fingerprint != self.data_fingerprint
            and data_fingerprint == self.epochs.fingerprint()
        ):
            data_fingerprint = self.data_fingerprint  # written before the data cache named the data
        stored = RunIdentity(
            config=state["config"],
            tokenizer_fingerprint=state["tokenizer_fingerprint"],
            data_fingerprint=data_fingerprint,
            world_size=state.get("world_size", 1),
        )
        verdict = judge_resume(
            stored, self.identity(), progress=state["progress"], checkpoint=str(path)
        )
        if verdict.refusal:
            raise UsageError(verdict.refusal)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self._apply_optimizer_settings(optimizer_changes(state["config"], self.identity().config))
        self.progress = Progress.from_dict(state["progress"])
        self._follow_resumed_budget(state["config"])
        restore_rng_state(state["rng"])
        self.saved_step = self.validated_step = self.progress.step
        self.saved_epoch, self.saved_score = self.progress.epoch, state.get("score")
        self.resumed_from = path
        log.info("resumed from %s at step %d (epoch %d, batch %d)", path, self.progress.step,
                 self.progress.epoch, self.progress.position)  # fmt: skip
        for level, message in verdict.notes:
            log.log(level, message)

    def _follow_resumed_budget(self, stored: dict) -> None:
        """Keep, re-plan or end the clock the checkpoint saved, for the budgets this resume
        gives (`run_plan.resumed_clock`)."""
        if note := resumed_clock(self.config, stored, self.progress):
            log.info("%s", note)
        self.clock.restart(self.progress.elapsed_s)
        clock, minutes = self.progress.clock, self.config.train.max_minutes
        if clock is not None and minutes is not None and minutes * 60 != clock.budget_s:
            why = f"train.max_minutes changes from {clock.budget_s / 60:g} to {minutes:g}: "
            self.clock.replan(elapsed=self.progress.elapsed_s, budget_s=minutes * 60, why=why)

    def _apply_optimizer_settings(self, changes: list[tuple[str, object, object]]) -> None:
        """Put the config's AdamW settings into the optimizer restored from a checkpoint (which
        holds the values the run had) and log each of `changes` (key, was, now)."""
        t = self.config.train
        for group in self.optimizer.param_groups:
            group.update(betas=tuple(t.betas), eps=t.eps, weight_decay=t.weight_decay)
        for key, was, now in changes:
            where = "in the optimizer" if key in OPTIMIZER_KEYS else "in the schedule"
            log.info("train.%s changes from %s to %s with this resume (%s)", key, was, now, where)


def reads_each_step(device: torch.device) -> bool:
    """Whether training reads each step's outcome as it ends: not on CUDA, whose kernels run
    behind the host and would be waited for; on the CPU the value is already there."""
    return device.type != "cuda"


def model_args(config: Config, tokenizer: Tokenizer) -> ModelArgs:
    """The model's shape: the config's model section, with the tokenizer's vocabulary sizes."""
    return ModelArgs.from_config(
        config.model,
        src_vocab_size=tokenizer.src_vocab_size,
        tgt_vocab_size=tokenizer.tgt_vocab_size,
        pad_id=PAD_ID,
    )


@contextlib.contextmanager
def _out_of_memory_refused(device: torch.device) -> Iterator[None]:
    """An allocation that fails while the model is built is one line (the estimate of
    `check_fits` let it through: another process took the memory meanwhile)."""
    try:
        yield
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        if not isinstance(exc, torch.OutOfMemoryError) and "alloc" not in str(exc):
            raise
        cause = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise UsageError(
            f"the model does not fit in the memory available on {device} ({cause}); use a "
            "smaller model or free some memory"
        ) from None


def open_session(
    config: Config, *, resume: bool, overwrite: bool, rank: int = 0, world_size: int = 1
) -> Session:
    """Check the run directory, device, data and memory, build the model and optimizer, then
    prepare the run directory (nothing is written or removed there before); restore the model
    and optimizer when resuming.

    Under torchrun, process `rank` > 0 writes nothing: it reads the run directory (tokenizer,
    checkpoint) that process 0 has prepared before it.
    """
    paths = RunPaths(Path(config.run_dir))
    writer = rank == 0
    checkpoint = check_run_dir(paths, config, resume=resume, overwrite=overwrite, writer=writer)
    device = select_device(config.train.device)
    use_threads(config.train.threads)
    dtype = training_precision(config.train.precision, device)
    log.info("precision: %s (train.precision %s) on %s", precision_name(dtype),
             config.train.precision, device.type)  # fmt: skip
    tokenizer = None
    if checkpoint or not writer:
        check_manifest(paths.root, [TOKENIZER_FILE])
        tokenizer = Tokenizer.load(paths.root)
    start = starting_plan(config, paths, checkpoint=checkpoint, device=device, dtype=dtype,
                          tokenizer=tokenizer, world_size=world_size)  # fmt: skip
    config = start.config
    splits, tokenizer, data_fingerprint = training_splits(
        config, tokenizer=tokenizer, entry=start.entry, validation=start.validation
    )
    log_start(config, splits["train"], tokenizer)
    args = model_args(config, tokenizer)
    check_fits(args, planned(config.train.max_tokens, "train.max_tokens"), device)
    torch.manual_seed(config.train.seed)
    with _out_of_memory_refused(device):
        model = build_model(args).to(device)
        optimizer = build_optimizer(model, config)
    log.info("model: %s parameters", f"{sum(q.numel() for q in model.parameters()):,}")
    log.info("%s", describe_flops(args, device, dtype))
    epochs = EpochPlan.from_config(config, splits["train"], tokenizer)
    if not checkpoint and writer:  # config, device, data and memory are good: now the directory
        create_run_dir(paths, config)
        write_plan(paths, start)
        tokenizer.save(paths.root)
        record_manifest(paths.root)
    session = Session(
        config=config,
        paths=paths,
        device=device,
        dtype=dtype,
        tokenizer=tokenizer,
        validation_split=splits["validation"],
        model=model,
        model_args=args,
        optimizer=optimizer,
        epochs=epochs,
        store=CheckpointStore(
            paths.checkpoints,
            keep_last=planned(config.train.keep_last, "train.keep_last"),
            keep_best=config.train.keep_best,
            mode="max",
        ),
        data_fingerprint=data_fingerprint,
        world_size=world_size,
        read_each_step=reads_each_step(device),
    )
    session.progress.clock = start.clock
    if checkpoint:
        session.restore(checkpoint)
    if writer:
        resumed_at = session.progress.step if checkpoint else None
        record_opened_run(paths, session.config, resumed_at=resumed_at)
        start_run_log(paths.root)
        session.tensorboard = open_tensorboard(
            paths.root, enabled=config.train.tensorboard, resumed_at=resumed_at
        )
    return session

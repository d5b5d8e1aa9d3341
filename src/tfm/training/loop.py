"""The training loop: token-budget batches, §5.3 schedule, validation, checkpoints, budgets.

`train(config)` is the one entry point. It trains (or resumes) the run in `config.run_dir` until
a budget (steps, epochs, minutes), early stopping or a stop request ends it, writing `last.pt`,
`best.pt`, rotating training-state checkpoints and `metrics.jsonl` as it goes.

Every `train.log_every` steps, metrics.jsonl gets the mean loss of the steps since the last line
and their tokens per second of training time (validation and checkpoints left out). The steps
since the last line are saved with each checkpoint, so a resumed run logs what the uninterrupted
run would have. What each epoch trains on is the session's epoch plan (`tfm.data.epochs`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from tfm.config import Config, TrainConfig, planned
from tfm.data.batching import steps_in_epoch
from tfm.data.tokenizer import Tokenizer
from tfm.device import peak_memory_mib
from tfm.training.data_parallel import DataParallel
from tfm.training.distributed import open_session_everywhere, process_group
from tfm.training.progress import TrainingProgress
from tfm.training.recipe.checks import check_settings
from tfm.training.session import Session, StopFlag
from tfm.training.state import LogWindow
from tfm.training.step import optimizer_step
from tfm.training.utilisation import utilisation

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    run_dir: str
    steps: int
    epochs_completed: int
    stopped_because: str
    best_score: float | None
    best_step: int | None
    interrupted_by: str | None = None
    rank: int = 0  # this process's rank under torchrun; only rank 0 writes files
    peak_mib: float = 0.0  # the most memory held: process RSS, or GPU allocations on CUDA
    planned_steps: int | None = None  # what the step and epoch budgets allowed, as re-planned
    elapsed_s: float = 0.0  # training and validation time, all sessions of the run together
    budget_s: float | None = None  # train.max_minutes in seconds
    metric: str = "bleu"  # the validation score `best_score` is of (train.early_stopping_metric)
    last_validation: dict | None = None  # the last validation's metrics event
    findings: tuple[str, ...] = ()  # degeneration found at the last validation (diagnostics)


def train(
    config: Config,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress_bar: bool = True,
    stop: StopFlag | None = None,
    tokenizer: Tokenizer | None = None,
    plan_notes: dict | None = None,
) -> TrainResult:
    """Train (or `resume`) the run described by `config`; see the module docstring. A new run
    trains with `tokenizer` where one is given (a back-translation run's phases share one), and
    keeps `plan_notes` in its plan.json.

    Under torchrun, this process trains one data-parallel replica (`training/distributed.py`).
    """
    with process_group(config) as replicas:
        session = open_session_everywhere(replicas, config, resume=resume, overwrite=overwrite,
                                          tokenizer=tokenizer, plan_notes=plan_notes)  # fmt: skip
        parallel = DataParallel(replicas, session, stop or StopFlag())
        try:
            return _train(session, parallel, progress_bar=progress_bar)
        finally:
            parallel.close()


def _train(session: Session, parallel: DataParallel, *, progress_bar: bool) -> TrainResult:
    steps_planned = _planned_steps(session, parallel)
    if parallel.is_main and session.resumed_from is None:
        for warning in check_settings(session.config, steps_planned):
            log.warning("%s", warning)
    bar = TrainingProgress(
        total=steps_planned,
        initial=session.progress.step,
        enabled=progress_bar and parallel.is_main,
    )
    try:
        reason = _run(session, parallel, bar)
        session.read_steps()
    finally:
        bar.close()
    steps_planned = _planned_steps(session, parallel)
    if parallel.is_main and session.progress.log_window.steps:
        _log_training(session, bar, partial=True)
    if parallel.is_main and session.saved_step != session.progress.step:
        session.save_checkpoint(score=None)
    elif parallel.is_main and session.saved_epoch != session.progress.epoch:
        # The last step was validated and saved before its epoch was counted as done: save
        # again (same step and score) so that the newest checkpoint says the epochs are done.
        session.save_checkpoint(score=session.saved_score)
    parallel.wait_for_main()
    session.close_tensorboard()
    p = session.progress
    return TrainResult(
        run_dir=str(session.paths.root),
        steps=p.step,
        epochs_completed=p.epoch,
        stopped_because=reason,
        best_score=p.best_score,
        best_step=p.best_step,
        interrupted_by=parallel.stop.signal_name,
        rank=parallel.replicas.rank,
        peak_mib=peak_memory_mib(session.device),
        planned_steps=steps_planned,
        elapsed_s=p.elapsed_s,
        budget_s=_budget_s(session.config.train),
        metric=planned(session.config.train.early_stopping_metric, "train.early_stopping_metric"),
        last_validation=session.last_validation,
        findings=session.last_findings,
    )


def _budget_s(t: TrainConfig) -> float | None:
    return None if t.max_minutes is None else 60 * t.max_minutes


def _planned_steps(session: Session, parallel: DataParallel) -> int | None:
    """The step count the step and epoch budgets allow (for the progress bar), or None."""
    t = session.config.train
    by_epochs = None
    if t.max_epochs is not None:
        counts = session.epochs.batch_counts(range(t.max_epochs), near=session.progress.epoch)
        world_size = parallel.replicas.world_size
        by_epochs = sum(
            steps_in_epoch(n, accumulate=t.accumulate, world_size=world_size) for n in counts
        )
    budgets = [n for n in (session.max_steps, by_epochs) if n is not None]
    return min(budgets) if budgets else None


def _run(session: Session, parallel: DataParallel, bar: TrainingProgress) -> str:
    t = session.config.train
    p = session.progress
    started = time.monotonic() - p.elapsed_s
    session.now = lambda: time.monotonic() - started
    if spent := _budget_spent(session):
        log.info("nothing to train: the run has already reached train.%s", spent)
        return spent
    window_clock = time.monotonic()  # training time only: restarted after each step's checks
    shown = p.plan  # the plan the progress bar counts to
    while t.max_epochs is None or p.epoch < t.max_epochs:
        data = session.epochs.data(p.epoch)
        while p.position < len(data.batches):
            group, consumed = parallel.shard(data.batches, p.position)
            if not group:
                break
            optimizer_step(session, parallel, [data.batch(b) for b in group])
            p.position += consumed
            if _read_due(session, p.step):
                session.read_steps()  # waits for the device: the window's time includes it
            p.elapsed_s = time.monotonic() - started
            window = p.log_window
            window.seconds += time.monotonic() - window_clock
            bar.update()
            if p.step % t.log_every == 0 and window.steps:
                if parallel.is_main:
                    _log_training(session, bar)
                p.log_window = LogWindow()  # the next line's steps start here
            reason = _after_step(session, parallel, started)
            if p.plan is not shown:  # re-planned
                bar.retotal(_planned_steps(session, parallel))
                shown = p.plan
            window_clock = time.monotonic()
            if reason:
                p.elapsed_s = time.monotonic() - started  # the last validation included
                return reason
        p.epoch += 1
        p.position = 0
    if session.validated_step != p.step:
        parallel.validate()
    return "max_epochs"


def _read_due(session: Session, step: int) -> bool:
    """Whether the loop reads the steps' outcomes from the device after `step`: for a log line,
    a validation or a checkpoint (each process, so that all of them stop together on too many
    non-finite steps)."""
    t = session.config.train
    every = (t.log_every, t.validate_every, session.checkpoint_every)
    return any(n is not None and step % n == 0 for n in every) or _out_of_steps(session, step)


def _log_training(session: Session, bar: TrainingProgress, *, partial: bool = False) -> None:
    """Write the log window's line to metrics.jsonl and the progress bar. A `partial` window is
    the steps after the last line when training ends: logged (marked so) for a short run's curve,
    and kept in the progress, so that a resumed run still logs the uninterrupted run's lines."""
    p = session.progress
    window = p.log_window
    event = {
        "step": p.step,
        "epoch": p.epoch,
        "train_loss": window.loss_sum / window.steps,
        "lr": session.optimizer.param_groups[0]["lr"],
        "tokens_per_s": round(window.tokens / max(window.seconds, 1e-9), 1),
        "step_ms": round(1e3 * window.seconds / window.steps, 2),  # the window's mean
        "peak_mib": round(peak_memory_mib(session.device)),
        **utilisation(window.flops, window.seconds, session.device, session.dtype),
    }
    if partial:
        event["partial"] = True
    session.write_metrics(event)
    if not partial:
        bar.window(event)


def _budget_spent(session: Session) -> str | None:
    """The step, epoch or time budget a resumed run had used up before this process took a step."""
    t, p = session.config.train, session.progress
    if t.max_epochs is not None and p.epoch >= t.max_epochs:
        return "max_epochs"
    if _out_of_steps(session, p.step):
        return _steps_reason(session)
    if _out_of_time(t, p.elapsed_s):
        return "max_minutes"
    return None


def _out_of_steps(session: Session, step: int) -> bool:
    end = session.max_steps
    return end is not None and step >= end


def _steps_reason(session: Session) -> str:
    """Why a run that reached its planned last step stopped there."""
    plan = session.progress.plan
    return "early_stopping" if plan is not None and plan.cooling else "max_steps"


def _out_of_time(t: TrainConfig, elapsed_s: float) -> bool:
    return t.max_minutes is not None and elapsed_s >= 60 * t.max_minutes


def _after_step(session: Session, parallel: DataParallel, started: float) -> str | None:
    """Validate when due (and re-plan a run that follows the clock); say why training ends now,
    or None to go on."""
    t = session.config.train
    p = session.progress
    stop = parallel.stop
    out_of_time = _out_of_time(t, time.monotonic() - started)
    out_of_time = parallel.agree(out_of_time)  # every process sees what any one of them saw
    if out_of_time or stop.requested:
        session.read_steps()
    if stop.requested:
        return "interrupted"
    validating = p.step % session.validate_every == 0
    checkpointing = session.checkpoint_every is not None and p.step % session.checkpoint_every == 0
    if validating or checkpointing:
        follow_clock(session, parallel, p.elapsed_s, validating=validating)
    out_of_steps = _out_of_steps(session, p.step)
    if validating or out_of_steps or out_of_time:
        began = time.monotonic()
        no_gain = parallel.validate()
        session.clock.validated(parallel.largest(time.monotonic() - began))
        if no_gain and not _cooling_down(session, parallel):
            return "early_stopping"
        if stop.requested:
            return "interrupted"
    elif checkpointing:
        parallel.checkpoint()
    if out_of_steps:
        return _steps_reason(session)
    if out_of_time:
        return "max_minutes"
    return None


def follow_clock(
    session: Session, parallel: DataParallel, elapsed: float, *, validating: bool
) -> None:
    """Re-plan a run that follows the clock, the same on every process (process 0's plan)."""
    if session.progress.clock is None:
        return
    session.clock.replan(elapsed=parallel.largest(elapsed), validating=validating)
    parallel.share_plan(session.progress)


def _cooling_down(session: Session, parallel: DataParallel) -> bool:
    """Whether a run that early stopping would end cools down first (a cosine decay with room
    for it); a run already cooling down goes on to its end."""
    p, t = session.progress, session.config.train
    if p.plan is not None and p.plan.cooling:
        return True
    end = session.clock.cool_down(every=session.checkpoint_every or session.validate_every)
    if end is None:
        return False
    parallel.share_plan(p)
    if parallel.is_main:
        metric, sign = t.early_stopping_metric, -1 if t.early_stopping_metric == "loss" else 1
        log.info("step %d: validation %s has not improved for %d validations (best %.2f at step "
                 "%s): cooling down to step %d, then stopping", p.step, metric,
                 p.validations_without_gain, sign * (p.best_score or 0.0), p.best_step,
                 end)  # fmt: skip
    return True

"""`tfm train`: load the config with the command line's overrides, train, and stop cleanly on
SIGINT or SIGTERM (finish the step, write a checkpoint, say how to resume).

The same command run twice trains once: a run directory that holds a finished run of the same
config is reported as such (exit 0). A run that the time limit (`train.max_minutes`) stops
before its step or epoch budget ends with a warning that gives the validation score reached and
the command that resumes it; when its model is not usable yet (`diagnostics.unusable_model`:
validation BLEU below 1, or identical or repeating hypotheses at the last validation) the
command fails (exit 1), so that a script does not go on to translate with it.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tfm.config import Config, load_config
from tfm.device import check_device_name
from tfm.errors import TfmError, TrainingError, UsageError
from tfm.rundir.paths import check_path_length
from tfm.training import StopFlag, TrainResult, train
from tfm.training.diagnostics import unusable_model
from tfm.training.distributed import from_environment, said_once
from tfm.training.run_log import collect_run_log
from tfm.training.run_preparation import finished_run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainOutcome:
    """What `tfm train` reports: the run directory to print (None when interrupted, and on
    every process of a torchrun job but rank 0) and the exit code (0, or 130/143 when a signal
    stopped training)."""

    run_dir: str | None
    exit_code: int


def train_run(
    config: Path,
    *,
    overrides: Sequence[str] = (),
    device: str | None = None,
    threads: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> TrainOutcome:
    """Train from the YAML file `config` with `overrides` (section.key=value), `device` and
    `threads` (train.device, train.threads) on top; logs the result and, when interrupted or cut
    short, how to resume."""
    if resume and overwrite:
        raise UsageError("--resume and --overwrite cannot be used together")
    sets = list(overrides)
    if device is not None:
        sets.append(f"train.device={check_device_name(device)}")
    if threads is not None:
        sets.append(f"train.threads={threads}")
    with said_once():  # under torchrun, every process reads it
        cfg = load_config(config, sets)
    check_path_length(Path(cfg.run_dir), "run_dir")
    if not resume and not overwrite and (finished := _finished(cfg)):
        first = from_environment().is_main  # under torchrun, one process says it
        if first:
            log.info("%s", finished)
        return TrainOutcome(cfg.run_dir if first else None, 0)
    with collect_run_log():
        return _train_and_report(cfg, config, sets, resume=resume, overwrite=overwrite,
                                 progress=progress)  # fmt: skip


def _finished(cfg: Config) -> str | None:
    """The line saying that `cfg`'s run is trained already, or None."""
    if cfg.data.monolingual:
        from tfm.commands.backtranslated import finished_backtranslation

        return finished_backtranslation(cfg)
    return finished_run(cfg)


def _train_and_report(
    cfg: Config, config: Path, sets: list[str], *, resume: bool, overwrite: bool, progress: bool
) -> TrainOutcome:
    stop = StopFlag()
    with stopping_on_signals(stop):
        if cfg.data.monolingual:  # in phases, the last of which trains in run_dir
            from tfm.commands.backtranslated import train_backtranslated

            result = train_backtranslated(cfg, resume=resume, overwrite=overwrite,
                                          progress_bar=progress, stop=stop)  # fmt: skip
        else:
            result = train(cfg, resume=resume, overwrite=overwrite, progress_bar=progress,
                           stop=stop)  # fmt: skip
    world_size = from_environment().world_size  # under torchrun, resume under torchrun
    launcher = f"torchrun --nproc_per_node={world_size} -m tfm" if world_size > 1 else "tfm"
    if cfg.data.monolingual:  # its phases read the config it began with
        given = "".join(f" --set {shlex.quote(s)}" for s in sets)
        resume_command = f"{launcher} train --config {shlex.quote(str(config))}{given} --resume"
    else:  # with --set, --device or --threads, the run's resolved config holds them
        resume_config = Path(cfg.run_dir) / "config.yaml" if sets else config
        resume_command = f"{launcher} train --config {shlex.quote(str(resume_config))} --resume"
    if result.interrupted_by:
        where = f"at step {result.steps}; checkpoint written"
        if result.stopped_because == "back-translating":
            where = "while back-translating; every whole line written is kept"
        log.info("interrupted by %s %s. Resume with:\n  %s", result.interrupted_by, where,
                 resume_command)  # fmt: skip
        # 128 + the signal's number, as shells report it
        return TrainOutcome(None, 143 if result.interrupted_by == "SIGTERM" else 130)
    metric = result.metric  # the run's, planned or given
    sign = -1 if metric == "loss" else 1  # a loss is tracked negated, so higher is better
    best = "none" if result.best_score is None else f"{sign * result.best_score:.2f}"
    log.info("done: %d steps (%s); best validation %s %s at step %s;%s peak memory %.0f MiB",
             result.steps, result.stopped_because, metric, best, result.best_step,
             _time_used(result), result.peak_mib)  # fmt: skip
    if result.stopped_because == "early_stopping" and result.budget_s and result.rank == 0:
        left = (result.budget_s - result.elapsed_s) / 60
        log.info("early stopping left %.1f of the %g minutes unused: the validation score had "
                 "stopped improving, so more time would not have helped this run (more data or "
                 "another model might)", left, result.budget_s / 60)  # fmt: skip
    cut_short = (
        result.stopped_because == "max_minutes" and (result.planned_steps or 0) > result.steps
    )
    if cut_short and result.rank == 0:  # the process that validated
        _cut_short(cfg, result, f"{resume_command} --set train.max_minutes=null")
    if result.rank == 0:
        _calibrate(cfg)
    return TrainOutcome(str(result.run_dir) if result.rank == 0 else None, 0)


def _calibrate(cfg: Config) -> None:
    """Fit the run's confidence map for its best.pt (`tfm.commands.calibrate`: about one
    validation's time, after the budget); a run it fails for still trained, and says how to fit
    it later."""
    from tfm.commands.calibrate import calibrate_run

    try:
        calibrate_run(cfg.run_dir, device=cfg.train.device, threads=cfg.train.threads)
    except (TfmError, ValueError) as exc:
        log.warning("no confidence map: %s; translations get none until `tfm calibrate --run "
                    "%s` fits one", exc, cfg.run_dir)  # fmt: skip


def _time_used(result: TrainResult) -> str:
    """The time the run used of its budget (" M of B minutes (P%);"), or "" without one."""
    if not result.budget_s:
        return ""
    used, budget = result.elapsed_s / 60, result.budget_s / 60
    return f" {used:.1f} of {budget:g} minutes ({result.elapsed_s / result.budget_s:.0%});"


def _cut_short(cfg: Config, result: TrainResult, resume: str) -> None:
    """Say loudly that the time limit stopped training early; raise TrainingError when the
    model is not usable yet (see the module docstring)."""
    validation = result.last_validation or {}
    bleu = validation.get("val_bleu")
    reached = "no validation" if bleu is None else f"validation BLEU {bleu:.2f}"
    stopped = (
        f"the time limit train.max_minutes={cfg.train.max_minutes:g} stopped training at step "
        f"{result.steps} of the {result.planned_steps} planned ({reached})"
    )
    unusable = unusable_model(bleu, result.findings)
    verdict = f"the model is NOT usable yet: {unusable}" if unusable else "it is under-trained"
    log.warning("!!! TRAINING CUT SHORT: %s.\n!!! %s; to train on, resume without the time "
                "limit:\n  %s", stopped, verdict[0].upper() + verdict[1:], resume)  # fmt: skip
    if unusable:
        raise TrainingError(f"{stopped}; the model is not usable yet: {unusable}")


@contextlib.contextmanager
def stopping_on_signals(stop: StopFlag) -> Iterator[None]:
    """While the body runs, the first SIGINT/SIGTERM sets `stop` (finish the step, checkpoint,
    exit); a second, or the first before training has begun (nothing to save yet), stops at once.
    The handlers from before come back afterwards."""

    def handler(signum, frame):
        if stop.requested:
            raise KeyboardInterrupt
        name = signal.Signals(signum).name
        if not stop.training:
            _say_from_a_thread("tfm: %s received before training began: stopping now", name)
            raise KeyboardInterrupt
        stop.request(signum)
        _say_from_a_thread("tfm: %s received: finishing the step and writing a checkpoint (send "
                           "it again to stop at once)", name)  # fmt: skip

    before = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, previous in before.items():
            signal.signal(signum, previous)


def _say_from_a_thread(message: str, *args: object) -> None:
    """Log a warning from a signal handler. The handler runs between any two steps of the main
    thread, also in the middle of a write to stderr or train.log, where writing to the same file
    again fails ("reentrant call") and would end the run with a traceback; another thread waits
    for that write to finish instead."""
    threading.Thread(target=log.warning, args=(message, *args), name="tfm-signal").start()

"""`tfm train`: load the config with the command line's overrides, train, and stop cleanly on
SIGINT or SIGTERM (finish the step, write a checkpoint, say how to resume)."""

from __future__ import annotations

import logging
import shlex
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tfm.config import load_config
from tfm.device import check_device_name
from tfm.errors import UsageError
from tfm.training import StopFlag, train

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
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> TrainOutcome:
    """Train from the YAML file `config` with `overrides` (section.key=value) and `device`
    (the same as train.device) on top; logs the result and, when interrupted, how to resume."""
    if resume and overwrite:
        raise UsageError("--resume and --overwrite cannot be used together")
    sets = list(overrides)
    if device is not None:
        sets.append(f"train.device={check_device_name(device)}")
    cfg = load_config(config, sets)
    stop = StopFlag()
    previous = _install_stop_handlers(stop)
    try:
        result = train(cfg, resume=resume, overwrite=overwrite, progress_bar=progress, stop=stop)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if result.interrupted_by:
        # With --set or --device, the run's own resolved config holds them (run_dir too).
        resume_config = Path(cfg.run_dir) / "config.yaml" if sets else config
        log.info(
            "interrupted by %s at step %d; checkpoint written. Resume with:\n"
            "  tfm train --config %s --resume", result.interrupted_by, result.steps,
            shlex.quote(str(resume_config)),
        )  # fmt: skip
        # 128 + the signal's number, as shells report it
        return TrainOutcome(None, 143 if result.interrupted_by == "SIGTERM" else 130)
    metric = cfg.train.early_stopping_metric
    sign = -1 if metric == "loss" else 1  # a loss is tracked negated, so higher is better
    best = "none" if result.best_score is None else f"{sign * result.best_score:.2f}"
    log.info("done: %d steps (%s); best validation %s %s at step %s; peak memory %.0f MiB",
             result.steps, result.stopped_because, metric, best, result.best_step,
             result.peak_mib)  # fmt: skip
    return TrainOutcome(str(result.run_dir) if result.rank == 0 else None, 0)


def _install_stop_handlers(stop: StopFlag) -> dict:
    """First SIGINT/SIGTERM: finish the step, checkpoint, exit. Second: stop at once."""

    def handler(signum, frame):
        if stop.requested:
            raise KeyboardInterrupt
        stop.request(signum)
        log.warning(
            "tfm: %s received: finishing the step and writing a checkpoint (send it again to "
            "stop at once)",
            signal.Signals(signum).name,
        )

    return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

"""A training run's directory before and after its session opens: created (or refused, or wiped
with --overwrite) for a new run, its newest complete checkpoint found for a resume, and, once a
resume is accepted, its config.yaml rewritten and metrics.jsonl cut back to the checkpoint's step.
"""

from __future__ import annotations

from tfm.config import Config, to_yaml
from tfm.errors import UsageError
from tfm.rundir.atomic import atomic_write_text
from tfm.rundir.lock import holds_run_files, remove_run_files
from tfm.rundir.metrics import truncate_metrics
from tfm.rundir.paths import RunPaths, remember_run
from tfm.rundir.store import CheckpointStore, LoadedCheckpoint


def prepare_run_dir(
    paths: RunPaths, config: Config, *, resume: bool, overwrite: bool, writer: bool = True
) -> LoadedCheckpoint | None:
    """Create or check the run directory; when resuming, return the checkpoint to load.

    Only the `writer` (process 0 under torchrun) creates anything; the others only look.
    """
    root = paths.root
    if resume:
        store = CheckpointStore(paths.checkpoints, keep_last=1, keep_best=1, mode="max")
        latest = store.latest_loadable() if paths.checkpoints.exists() else None
        if latest is None:
            raise UsageError(
                f"--resume: no complete checkpoint in {paths.checkpoints}; "
                "start the run afresh with --overwrite instead"
            )
        return latest
    if not writer:
        return None
    exists = holds_run_files(root)  # the lock file alone is no run
    if exists and not overwrite:
        raise UsageError(
            f"run directory {root} already exists; use --resume to continue it "
            "or --overwrite to start again"
        )
    if exists:
        remove_run_files(root)  # all but the lock this process holds
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(to_yaml(config), paths.config)
    return None


def record_opened_run(paths: RunPaths, config: Config, *, resumed_at: int | None) -> None:
    """After the session opened: on a resume (`resumed_at`, the checkpoint's step), keep the
    config it goes on with and drop the metrics logged after the checkpoint, so the run's log
    reads as one run; then remember the run as the last one (`tfm eval` without --run)."""
    if resumed_at is not None:
        atomic_write_text(to_yaml(config), paths.config)
        truncate_metrics(paths.metrics, resumed_at)
    remember_run(paths.root)

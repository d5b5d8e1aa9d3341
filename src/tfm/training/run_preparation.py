"""A training run's directory before and after its session opens.

Nothing is written to it until the configuration, the device and the data have been checked, so
that a mistake in any of them leaves the directory as it was and the same command works once the
mistake is fixed: `check_run_dir` only reads (the checkpoint to resume, or whether a new run may
start there), `create_run_dir` then wipes it (--overwrite) and writes config.yaml. A directory
holding only what a run writes before its first step (config.yaml, tokenizer.json, its
manifest.json, train.log) is such a
failed start, and a new run replaces it. Once a resume is accepted, config.yaml is rewritten
and metrics.jsonl cut back to the checkpoint's step.

`finished_run` recognises a run that is already complete with the same config, so that running
the same `tfm train` command twice trains once.
"""

from __future__ import annotations

import json
from pathlib import Path

from tfm.atomic import atomic_write_text
from tfm.config import Config, load_config, to_yaml
from tfm.data.tokenizer import FILE_NAME as TOKENIZER_FILE
from tfm.errors import ConfigError, UsageError
from tfm.rundir.lock import LOCK_FILE, remove_run_files
from tfm.rundir.manifest import MANIFEST_FILE, replace_text
from tfm.rundir.metrics import read_metrics, truncate_metrics
from tfm.rundir.paths import BACKTRANSLATION_FILES, RunPaths, remember_run
from tfm.rundir.store import CheckpointStore, LoadedCheckpoint
from tfm.training.recipe.plan import with_stored_plan
from tfm.training.run_log import LOG_FILE

# Written before training's first step
BEFORE_FIRST_STEP = {"config.yaml", "plan.json", TOKENIZER_FILE, MANIFEST_FILE, LOG_FILE}
# A directory holding only these holds no run (a run's back-translation phases come before it)
NOT_A_RUN = {*BEFORE_FIRST_STEP, LOCK_FILE, *BACKTRANSLATION_FILES}
# Keys that say how to run, not what is trained: a run that differs in these alone is the same run.
HOW_TO_RUN = {
    ("train", "threads"),
    ("train", "device"),
    ("train", "tensorboard"),
    ("data", "cache_dir"),
    ("data", "control_chars"),
}


def check_run_dir(
    paths: RunPaths, config: Config, *, resume: bool, overwrite: bool, writer: bool = True
) -> LoadedCheckpoint | None:
    """Whether the run may start or resume here; when resuming, the checkpoint to load. Reads
    only. Only the `writer` (process 0 under torchrun) checks a new run's directory."""
    if resume:
        latest = _latest_checkpoint(paths)
        if latest is None:
            raise UsageError(
                f"--resume: no complete checkpoint in {paths.checkpoints}; "
                "start the run afresh with --overwrite instead"
            )
        return latest
    if writer and holds_a_run(paths) and not overwrite:
        raise UsageError(
            f"run directory {paths.root} already exists; use --resume to continue it "
            "or --overwrite to start again"
        )
    return None


def holds_a_run(paths: RunPaths) -> bool:
    """Whether the directory holds more than a failed start leaves (see the module docstring)
    and the run directory's lock."""
    root = paths.root
    return root.is_dir() and any(entry.name not in NOT_A_RUN for entry in root.iterdir())


def create_run_dir(paths: RunPaths, config: Config) -> None:
    """Start the run's directory afresh (what `check_run_dir` allowed) with its config.yaml."""
    root = paths.root
    if holds_a_run(paths):  # --overwrite
        remove_run_files(root)  # all but the lock this process holds
    elif root.exists():  # a failed start: only its own files go
        for name in BEFORE_FIRST_STEP:
            (root / name).unlink(missing_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(to_yaml(config), paths.config)


def record_opened_run(paths: RunPaths, config: Config, *, resumed_at: int | None) -> None:
    """After the session opened: on a resume (`resumed_at`, the checkpoint's step), keep the
    config it goes on with and drop the metrics logged after the checkpoint (and a partial
    window's line), so the run's log reads as one run; then remember the run as the last one
    (`tfm eval` without --run)."""
    if resumed_at is not None:
        replace_text(paths.root, paths.config.name, to_yaml(config))
        truncate_metrics(paths.metrics, resumed_at)
        _drop_partial_windows(paths.metrics)
    remember_run(paths.root)


def _drop_partial_windows(path: Path) -> None:
    """Drop the lines of steps logged when training ended between two `train.log_every` lines:
    the resumed run logs those steps in the window they belong to (see `training.loop`)."""
    if not path.exists():
        return
    events = read_metrics(path)
    if any(event.get("partial") for event in events):
        kept = [json.dumps(event) + "\n" for event in events if not event.get("partial")]
        atomic_write_text("".join(kept), path)


def finished_run(config: Config) -> str | None:
    """When `config.run_dir` holds a run trained with this config (but for `HOW_TO_RUN`) to the
    end of its step or epoch budget or to early stopping: a line that says so (and remembers it
    as the last run); else None."""
    paths = RunPaths(Path(config.run_dir))
    if not paths.config.is_file() or not paths.checkpoints.is_dir():
        return None
    try:
        stored = load_config(paths.config, stored=True)
        continued = with_stored_plan(config, stored)
    except ConfigError:  # not this config's run: training says what to do
        return None
    if _what_is_trained(stored) != _what_is_trained(continued):
        return None
    latest = _latest_checkpoint(paths)
    if latest is None:
        return None
    progress = latest.state["progress"]
    reason = _finished_because(config, progress)
    if reason is None:
        return None
    remember_run(paths.root)
    return (
        f"{paths.root}: already trained with this config ({progress['step']} steps, stopped by "
        f"{reason}); use --resume to train further or --overwrite to start again"
    )


def _what_is_trained(config: Config) -> dict:
    values = config.model_dump(mode="json")
    for section, key in HOW_TO_RUN:
        values[section].pop(key, None)
    return values


def _finished_because(config: Config, progress: dict) -> str | None:
    """The budget (or early stopping) that a run at `progress` has reached, or None."""
    t = config.train
    plan = progress.get("plan")  # a length re-planned by the clock or by early stopping
    end = plan["end"] if plan else t.max_steps
    if t.max_epochs is not None and progress["epoch"] >= t.max_epochs:
        return "train.max_epochs"
    if plan and plan["cooling"] and progress["step"] >= end:
        return "early stopping"
    if end is not None and progress["step"] >= end:
        return "train.max_minutes" if progress.get("clock") else "train.max_steps"
    if t.patience is not None and progress["validations_without_gain"] >= t.patience:
        return "early stopping"
    return None


def _latest_checkpoint(paths: RunPaths) -> LoadedCheckpoint | None:
    if not paths.checkpoints.exists():
        return None
    store = CheckpointStore(paths.checkpoints, keep_last=1, keep_best=1, mode="max")
    return store.latest_loadable()

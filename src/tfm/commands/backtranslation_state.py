"""The state of a run with back-translation (`backtranslation.json`): begun, planned, read
back and waited for.

The state keeps the config the run began with (`config_of` gives it back with how to run it as
given now), the plan, and where each phase stands; process 0 writes it, atomically, and under
torchrun the other processes wait for what they need in it (`waited`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

from tfm.atomic import atomic_write_text
from tfm.config import Config
from tfm.data.cache.prepared_cache import prepared_entry
from tfm.data.monolingual import prepared_monolingual
from tfm.errors import UsageError
from tfm.json_file import read_json
from tfm.rundir.lock import remove_run_files
from tfm.rundir.paths import BACKTRANSLATION_FILES, RunPaths
from tfm.training.distributed import from_environment
from tfm.training.recipe.phase_budget import plan_from
from tfm.training.run_preparation import HOW_TO_RUN, holds_a_run

log = logging.getLogger(__name__)

STATE_FILE = BACKTRANSLATION_FILES[0]
WAIT_S = 2.0  # between looks at the state file, for processes that wait for process 0


def begin(config: Config, root: Path, *, resume: bool, overwrite: bool, main: bool) -> dict:
    """The run's state: read where the run goes on, else planned and written by process 0 (the
    others wait for it)."""
    if not main:
        return waited(root, lambda state: True)
    if overwrite and root.exists():
        remove_run_files(root)
    state = read_state(root)
    if state is not None and not resume:
        raise UsageError(
            f"run directory {root} already holds a run with back-translation; use --resume to "
            "continue it or --overwrite to start again"
        )
    if state is None:
        if resume:
            raise UsageError(f"--resume: {root} holds no run to continue; start it without it")
        if holds_a_run(RunPaths(root)):
            raise UsageError(f"run directory {root} already exists; use --overwrite to start again")
        return plan_run(config, root)
    if not same_run(state, config):
        log.warning("%s: going on with the config this run began with (%s)", root, STATE_FILE)
    return state


def plan_run(config: Config, root: Path) -> dict:
    """Phase 0 (module docstring): the data prepared, the plan made, the state written."""
    entry = prepared_entry(config)
    text = prepared_monolingual(config)
    plan = plan_from(config, entry, len(text), world_size=from_environment().world_size)
    state = {
        "config": config.model_dump(mode="json", exclude_unset=True),
        "plan": plan.record(),
        "monolingual": text.path.name,
        "reverse": {"done": False, "seconds": 0.0},
        "generation": {"done": False, "lines": 0, "seconds": 0.0},
    }
    root.mkdir(parents=True, exist_ok=True)
    write_state(root, state)
    return state


def config_of(state: dict, config: Config) -> Config:
    """The config the run began with, with how to run it (threads, device) as given now."""
    values = state["config"]
    for section, key in HOW_TO_RUN:
        part = getattr(config, section)
        if key in part.model_fields_set:
            values.setdefault(section, {})[key] = getattr(part, key)
    return Config.model_validate(values)


def same_run(state: dict, config: Config) -> bool:
    """Whether `config` is the one the run began with, but for how to run it."""
    stored = Config.model_validate(state["config"]).model_dump(mode="json")
    given = config.model_dump(mode="json")
    for section, key in HOW_TO_RUN:
        stored[section].pop(key, None)
        given[section].pop(key, None)
    return stored == given


def read_state(root: Path) -> dict | None:
    path = root / STATE_FILE
    if not path.is_file():
        return None
    return read_json(path, error=UsageError, missing=f"{path} is missing", what="the run's state")


def write_state(root: Path, state: dict) -> None:
    atomic_write_text(json.dumps(state, indent=1) + "\n", root / STATE_FILE)


def waited(root: Path, ready: Callable[[dict], bool]) -> dict:
    """The state once process 0 has written it and `ready(state)` holds."""
    while True:
        state = read_state(root)
        if state is not None and ready(state):
            return state
        time.sleep(WAIT_S)

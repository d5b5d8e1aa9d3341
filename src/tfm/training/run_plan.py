"""A run's plan at its start: derived from the data for a new run, taken from the stored config
for a run that goes on, and the clock a plan from a time budget follows (`clock.py`).

A new run's plan is written beside its config (plan.json: every derived key's rule with its
figures, and what its clock starts from), so that a second process under torchrun, and anyone
reading the run, have it. A resumed run keeps the clock its checkpoint saved; a resume that
changes `train.max_minutes` re-plans at once, and one that gives another `train.max_steps` or
`train.max_epochs` stops following the clock.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import torch

from tfm.atomic import atomic_write_text
from tfm.config import Config, load_config
from tfm.data.cache.cache_entry import CacheEntry
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import Tokenizer
from tfm.errors import ConfigError
from tfm.json_file import read_json
from tfm.rundir.paths import RunPaths
from tfm.rundir.store import LoadedCheckpoint
from tfm.training.recipe.plan import given_keys, plan_run, with_stored_plan
from tfm.training.state import ClockState, Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StartingPlan:
    """What a run starts from: its resolved config, and, for a new run planned here, each
    derived key's rule and the clock's start (None where the length is not the budget's)."""

    config: Config
    reasons: dict[str, str] = field(default_factory=dict)
    clock: ClockState | None = None
    entry: CacheEntry | None = None  # the prepared data the plan was made from
    validation: EncodedSplit | None = None
    notes: dict = field(default_factory=dict)  # more of the plan (a back-translation's phases)

    def record(self) -> str:
        clock = None if self.clock is None else self.clock.__dict__
        record = {"reasons": self.reasons, "clock": clock, **self.notes}
        return json.dumps(record, indent=1) + "\n"


def starting_plan(
    config: Config,
    paths: RunPaths,
    *,
    checkpoint: LoadedCheckpoint | None,
    device: torch.device,
    dtype: torch.dtype,
    tokenizer: Tokenizer | None,
    world_size: int,
    writer: bool = True,
    notes: dict | None = None,
) -> StartingPlan:
    """`config` with the keys it leaves unset planned from the data (`training.recipe`), or, for
    a run that goes on (a resume, or process > 0 under torchrun), taken from its stored config.
    A new run's plan is planned with `tokenizer` where one is given, and keeps `notes`."""
    if checkpoint is not None:
        stored = Config.model_validate(checkpoint.state["config"])
        return StartingPlan(with_stored_plan(config, stored))
    if not writer:  # process > 0 under torchrun: process 0 has planned and written its files
        stored = load_config(paths.config, stored=True)
        record = read_json(paths.plan, error=ConfigError, missing=f"{paths.plan} is missing",
                           what="the run's plan")  # fmt: skip
        clock = record.get("clock")
        return StartingPlan(with_stored_plan(config, stored), record.get("reasons", {}),
                            ClockState(**clock) if clock else None)  # fmt: skip
    planned, plan = plan_run(
        config, device=device, dtype=dtype, world_size=world_size, tokenizer=tokenizer
    )
    plan.log(planned)
    clock = None
    if plan.timed and planned.train.max_minutes is not None:
        clock = ClockState(
            budget_s=planned.train.max_minutes * 60,
            ceiling=plan.ceiling,
            step_s=0.0,
            validation_s=plan.validation_seconds,
            checkpoints_follow="train.checkpoint_every" in plan.derived,
        )
    return StartingPlan(planned, plan.reasons, clock, plan.entry, plan.validation, notes or {})


def write_plan(paths: RunPaths, plan: StartingPlan) -> None:
    atomic_write_text(plan.record(), paths.plan)


def resumed_clock(config: Config, stored: dict, progress: Progress) -> str | None:
    """Adjust a resumed run's clock to the config it goes on with; the line that says how
    (None: nothing changes). Another step or epoch budget given ends the clock; another time
    budget, or none, is re-planned or kept by the caller (`session_opening`, as it restores)."""
    if progress.clock is None:
        return None
    given = given_keys(config)["train"]
    for key in ("max_steps", "max_epochs"):
        if key in given and given[key] != stored["train"].get(key):
            progress.clock, progress.plan = None, None
            return f"train.{key}={given[key]} given: the run no longer follows the clock"
    minutes = config.train.max_minutes
    if minutes is None:
        progress.clock = None
        end = progress.plan.end if progress.plan else config.train.max_steps
        return f"train.max_minutes is no longer set: the run keeps its plan of {end} steps"
    return None

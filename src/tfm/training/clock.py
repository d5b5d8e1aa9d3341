"""Following the clock: a run whose length comes from a time budget re-times itself as it trains.

At each checkpoint and validation, the seconds a step took since the last re-plan (over half a
checkpoint cadence at least), and those of the latest validation, give the steps that still fit
in the budget (`steps_left`); the planned last step and the end of the cosine decay move there,
the decay re-anchored at the current step so that the learning rate stays continuous, never past
the most steps the corpus is worth. A machine that slows down mid-run still ends its decay at the
budget, and one that speeds up uses what it gains. Each re-plan is logged with its figures and
kept in the training state (`Progress.plan`, `Progress.clock`), so a resumed run goes on with it;
a resume under another `train.max_minutes` re-plans at once and says so.

A run with a fixed length (a config that gives `train.max_steps` or `train.max_epochs`) never
re-plans: its steps and rates are its config's, bit for bit.

Validation-based stopping (`train.patience`) under a cosine decay cools down before it stops:
the decay's end moves to `AVERAGE` checkpoints after the step that found no gain, so the
checkpoints that `tfm average` averages come from the low rates at the end (`cool_down`).
"""

from __future__ import annotations

import logging

from tfm.training.recipe.rules import AVERAGE, checkpoint_every
from tfm.training.schedule import Decay
from tfm.training.state import Progress, StepPlan

log = logging.getLogger(__name__)

RESERVE = 0.01  # of the budget, left unplanned: the last step's own noise
MIN_STEPS = 10  # a re-plan measures at least this many steps


def steps_left(
    *, seconds: float, step: int, step_s: float, validation_s: float, validate_every: int
) -> int:
    """The most steps after `step` that fit in `seconds` at `step_s` a step, with a validation
    of `validation_s` at every multiple of `validate_every` and one at the last step."""

    def cost(n: int) -> float:
        end = step + n
        validations = end // validate_every - step // validate_every + (end % validate_every > 0)
        return n * step_s + validations * validation_s

    each = max(step_s + validation_s / validate_every, 1e-9)
    n = max(int((seconds - validation_s) / each), 0)
    while n > 0 and cost(n) > seconds:
        n -= 1
    while cost(n + 1) <= seconds:
        n += 1
    return n


def current_decay(plan: StepPlan | None, configured: Decay | None) -> Decay | None:
    """The decay in force: a re-planned run's, else the config's."""
    if plan is None:
        return configured
    return Decay(start=plan.decay_from, end=plan.end, done=plan.decay_done)


def moved_to(
    end: int, *, step: int, warmup: int, decay: Decay | None, cadence: int | None
) -> StepPlan:
    """A plan that ends at `end` (at `step` at the earliest: no more steps), its decay
    re-anchored at `step` (or still starting at the end of warm-up)."""
    end = max(end, step)
    if decay is None or step <= warmup:
        return StepPlan(end=end, decay_from=warmup, decay_done=0.0, checkpoint_every=cadence)
    return StepPlan(end=end, decay_from=step, decay_done=decay.progress(step),
                    checkpoint_every=cadence)  # fmt: skip


class Clock:
    """The re-planning of one session's run (see the module docstring); `progress` holds its
    state; `configured` is the config's decay, `steps` its step budget, `validate_every` and
    `warmup` its cadence and warm-up."""

    def __init__(
        self,
        progress: Progress,
        *,
        configured: Decay | None,
        steps: int | None,
        warmup: int,
        validate_every: int,
    ) -> None:
        self.progress, self.configured, self.steps = progress, configured, steps
        self.warmup, self.validate_every = warmup, validate_every

    def replan(
        self,
        *,
        elapsed: float,
        budget_s: float | None = None,
        validating: bool = False,
        why: str = "",
    ) -> None:
        """Re-time the rest of the run from what was measured since the last re-plan (or,
        given `budget_s`, for a new budget with the figures last measured); `validating`: a
        validation at this step is still to come."""
        clock, p = self.progress.clock, self.progress
        if clock is None or (p.plan is not None and p.plan.cooling):
            return
        steps = p.step - clock.mark_step
        # A window shorter than half the checkpoint cadence (the cadence moved with the plan, or
        # a validation came soon after a checkpoint) is measured together with the next one:
        # alone, the checkpoint written in it would weigh on too few steps (on a GPU, 15 steps
        # of 0.03 s and a checkpoint's write time at 0.055 s a step, and the plan's end jumps).
        cadence = p.plan.checkpoint_every if p.plan is not None else None
        if budget_s is None and steps >= max(MIN_STEPS, (cadence or 0) // 2):
            clock.step_s = max(elapsed - clock.mark_elapsed - clock.validating_s, 0.0) / steps
        elif budget_s is None or clock.step_s <= 0:
            return  # too little measured since the last re-plan
        clock.budget_s = budget_s or clock.budget_s
        seconds = clock.budget_s * (1 - RESERVE) - elapsed - validating * clock.validation_s
        fit = steps_left(seconds=seconds, step=p.step, step_s=clock.step_s,
                         validation_s=clock.validation_s,
                         validate_every=self.validate_every)  # fmt: skip
        end = p.step + fit if clock.ceiling is None else min(p.step + fit, clock.ceiling)
        was = self.end
        cadence = checkpoint_every(end).value if clock.checkpoints_follow else None
        p.plan = moved_to(end, step=p.step, warmup=self.warmup, decay=self.decay,
                          cadence=cadence)  # fmt: skip
        clock.mark_step, clock.mark_elapsed, clock.validating_s = p.step, elapsed, 0.0
        clock.replans += 1
        log.info("step %d: %s%.3f s a step, %.1f s a validation, %.0f of %.0f s left: the plan "
                 "ends at step %d (was %d)", p.step, why, clock.step_s, clock.validation_s,
                 clock.budget_s - elapsed, clock.budget_s, p.plan.end, was)  # fmt: skip

    def restart(self, elapsed: float) -> None:
        """Measure afresh from now (a resumed run: the time since its checkpoint is lost)."""
        if (clock := self.progress.clock) is not None:
            clock.mark_step, clock.mark_elapsed, clock.validating_s = self.progress.step, elapsed, 0

    def validated(self, seconds: float) -> None:
        """Count a validation's `seconds` (they are not training time)."""
        if self.progress.clock is not None:
            self.progress.clock.validating_s += seconds
            self.progress.clock.validation_s = seconds

    @property
    def decay(self) -> Decay | None:
        return current_decay(self.progress.plan, self.configured)

    @property
    def end(self) -> int | None:
        """The planned last step: as re-planned, else the config's step budget."""
        return self.steps if self.progress.plan is None else self.progress.plan.end

    def cool_down(self, *, every: int) -> int | None:
        """Move the end `AVERAGE` checkpoints of `every` steps ahead, the decay with it, and stop
        re-timing; the new end, or None where the planned end is already as near."""
        p = self.progress
        end = p.step + AVERAGE * every
        if self.configured is None:
            return None
        if (p.plan.end if p.plan is not None else self.configured.end) <= end:
            return None
        cadence = None if p.plan is None else p.plan.checkpoint_every
        p.plan = moved_to(end, step=p.step, warmup=self.warmup, decay=self.decay, cadence=cadence)
        p.plan.cooling = True
        return end

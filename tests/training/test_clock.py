"""A run planned by its time budget follows the clock: on a machine that slows down or speeds up
mid-run it still ends its cosine decay at its last step, within the budget and using nearly all
of it; each re-plan is kept for a resume, a resume with a new budget re-plans, and early
stopping under the cosine decay cools down before it stops. A fake clock makes each step and
validation take a set number of seconds."""

import logging

import pytest
from builders import tiny_settings

import tfm.training.data_parallel as data_parallel
import tfm.training.loop as loop
from tfm.config import Config
from tfm.rundir.metrics import read_metrics
from tfm.training import train
from tfm.training.clock import Clock, steps_left
from tfm.training.recipe.calibration import Calibration
from tfm.training.schedule import FLOOR, peak_learning_rate
from tfm.training.state import ClockState, Progress, StepPlan

TIMED_STEP_S, VALIDATION_S = 1.0, 3.0


class FakeTime:
    """`time` for the training loop: it moves only when a step or a validation ends."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def fake_clock(monkeypatch):
    """The fake time, and `costs`: a step's seconds as a function of the step number."""
    fake = FakeTime()
    fake.costs = lambda step: TIMED_STEP_S  # type: ignore[attr-defined]
    real_step, real_validate = loop.optimizer_step, data_parallel.validate_and_checkpoint

    def step(session, parallel, batches):
        result = real_step(session, parallel, batches)
        fake.now += fake.costs(session.progress.step)  # type: ignore[attr-defined]
        return result

    def validate(session):
        fake.now += VALIDATION_S
        return real_validate(session)

    monkeypatch.setattr(loop, "time", fake)
    monkeypatch.setattr(loop, "optimizer_step", step)
    monkeypatch.setattr(data_parallel, "validate_and_checkpoint", validate)
    monkeypatch.setattr(Calibration, "step_seconds", lambda self, shape, tokens: TIMED_STEP_S)
    monkeypatch.setattr(Calibration, "validation_seconds", lambda self, shape, beam: VALIDATION_S)
    return fake


def timed_config(run_dir, minutes: float = 2.0, **train) -> Config:
    """The tiny config with its length left to the recipe under `minutes`, a cosine decay."""
    settings = tiny_settings(run_dir=str(run_dir), max_minutes=minutes, validate_every=20,
                             schedule="cosine", **train)  # fmt: skip
    for key in ("max_steps", "max_epochs", "decay_steps"):
        if key not in train:
            del settings["train"][key]
    return Config.model_validate(settings)


def last_rate(run_dir) -> float:
    return [e for e in read_metrics(run_dir / "metrics.jsonl") if "lr" in e][-1]["lr"]


@pytest.mark.parametrize(("change", "slower"), [(1.5, True), (0.5, False)])
def test_a_run_that_slows_down_or_speeds_up_ends_its_decay_at_the_budget(
    tmp_path, fake_clock, caplog, change, slower
):
    fake_clock.costs = lambda step: TIMED_STEP_S if step <= 30 else change
    config = timed_config(tmp_path / "run")
    with caplog.at_level(logging.INFO):
        result = train(config, progress_bar=False)
    planned = int(0.92 * (120 - 8 * VALIDATION_S) / TIMED_STEP_S)  # what the start planned
    assert result.stopped_because == "max_steps"
    assert (result.steps < planned) if slower else (result.steps > planned)
    assert 0.97 * 120 <= result.elapsed_s <= 120  # nearly all of the budget, and no more
    assert last_rate(tmp_path / "run") == pytest.approx(FLOOR * peak_learning_rate(config))
    assert "s a step, 3.0 s a validation" in caplog.text  # re-plans are logged with figures


def test_a_resume_keeps_the_plan_and_a_new_budget_moves_it(tmp_path, fake_clock, caplog):
    config = timed_config(tmp_path / "run", minutes=1.0)
    first = train(config, progress_bar=False)
    assert first.stopped_because == "max_steps"
    caplog.clear()
    longer = timed_config(tmp_path / "run", minutes=2.0)
    with caplog.at_level(logging.INFO):
        again = train(longer, resume=True, progress_bar=False)
    assert "train.max_minutes changes from 1 to 2: " in caplog.text
    assert again.steps > first.steps and 0.97 * 120 <= again.elapsed_s <= 120
    assert last_rate(tmp_path / "run") == pytest.approx(FLOOR * peak_learning_rate(longer))


def test_a_fixed_step_budget_never_replans(tmp_path, fake_clock):
    fake_clock.costs = lambda step: 5.0  # far slower than timed: a clock run would shorten
    config = timed_config(tmp_path / "run", minutes=30.0, max_steps=25, max_epochs=None)
    result = train(config, progress_bar=False)
    assert result.steps == 25 and result.stopped_because == "max_steps"


def test_steps_left_leaves_room_for_each_validation_and_the_last():
    figures = {"step_s": 1.0, "validation_s": 10.0, "validate_every": 20}
    # 115 s after step 0: 75 steps and validations at 20, 40, 60 and 75 (the last)
    assert steps_left(seconds=115, step=0, **figures) == 75
    # 110 s: 80 steps would need 4 validations (80 is one), 79 as well: 70 steps and 4
    assert steps_left(seconds=110, step=0, **figures) == 70
    assert steps_left(seconds=120, step=0, **figures) == 80  # the validation at 80 is the last
    assert steps_left(seconds=5, step=0, **figures) == 0


def test_a_validation_in_the_middle_pins_a_short_budget_to_it():
    """A run planned for 1,062 steps, validating at 531 and at the end, re-timed at step 528
    with 37 s left at 0.093 s a step and 21.5 s a validation: going past 531 would cost a second
    validation, so it ends at 531 with 15 s unused. Validated only at its end, it trains on."""
    figures = {"seconds": 37.0, "step": 528, "step_s": 0.093, "validation_s": 21.5}
    assert steps_left(**figures, validate_every=531) == 3
    assert steps_left(**figures, validate_every=1062) == 166  # (37 - 21.5) / 0.093


def test_early_stopping_under_a_cosine_decay_cools_down_first(tmp_path, caplog):
    settings = tiny_settings(run_dir=str(tmp_path / "run"), max_steps=40, validate_every=4,
                             schedule="cosine", decay_steps=38, patience=2, checkpoint_every=2,
                             lr=1e-9)  # fmt: skip  # a rate too low to learn: no gain
    with caplog.at_level(logging.INFO):
        result = train(Config.model_validate(settings), progress_bar=False)
    # no gain at steps 8 and 12: the decay ends 5 checkpoints of 2 steps later
    assert "cooling down to step 22, then stopping" in caplog.text
    assert result.steps == 22 and result.stopped_because == "early_stopping"
    assert last_rate(tmp_path / "run") == pytest.approx(FLOOR * 1e-9)


def test_a_window_shorter_than_half_the_checkpoint_cadence_is_timed_with_the_next():
    # at step 1,000, checkpoints every 150 steps; steps take 0.03 s, writing a checkpoint 0.5 s
    plan = StepPlan(end=5000, decay_from=1000, decay_done=0.2, checkpoint_every=150)
    state = ClockState(budget_s=300.0, ceiling=None, step_s=0.03, validation_s=3.0,
                       mark_step=1000, mark_elapsed=30.0)  # fmt: skip
    progress = Progress(step=1000, plan=plan, clock=state)
    clock = Clock(progress, configured=None, steps=None, warmup=100, validate_every=2000)
    progress.step = 1020  # 20 steps and a checkpoint: alone, 0.055 s a step
    clock.replan(elapsed=30.0 + 20 * 0.03 + 0.5)
    assert (state.step_s, state.replans, progress.plan.end) == (0.03, 0, 5000)
    progress.step = 1170  # measured with the next 150 steps, the checkpoint weighs as it does
    clock.replan(elapsed=30.0 + 170 * 0.03 + 0.5)
    assert state.replans == 1 and state.mark_step == 1170
    assert state.step_s == pytest.approx(0.03 + 0.5 / 170)

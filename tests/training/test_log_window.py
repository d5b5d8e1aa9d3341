"""The `train.log_every` window: a resumed run logs what the uninterrupted run logged, a checkpoint
from before the window was saved resumes with an empty one, and tokens/s leaves validation out."""

import types

from builders import metric_events, tiny_config

from tfm.rundir.checkpoint import save_checkpoint
from tfm.rundir.paths import RunPaths
from tfm.rundir.store import CheckpointStore
from tfm.training import data_parallel, loop, train

TIMING = ("tokens_per_s", "step_ms", "peak_mib", "elapsed", "model_tflops_per_s", "mfu")


def training_events(run) -> list[dict]:
    """metrics.jsonl's training lines without their timing fields."""
    events = metric_events(run, "train_loss")
    return [{k: v for k, v in e.items() if k not in TIMING} for e in events]


def test_a_run_resumed_between_two_lines_logs_the_uninterrupted_runs(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    keys = {"log_every": 4, "checkpoint_every": 3}
    train(tiny_config(straight, max_steps=12, **keys), progress_bar=False)
    train(tiny_config(resumed, max_steps=6, **keys), progress_bar=False)  # stops mid-window
    train(tiny_config(resumed, max_steps=12, **keys), resume=True, progress_bar=False)
    assert [e["step"] for e in training_events(straight)] == [4, 8, 12]
    assert training_events(resumed) == training_events(straight)


def test_a_checkpoint_without_a_window_resumes_with_an_empty_one(tmp_path):
    every_step, run = tmp_path / "every-step", tmp_path / "run"
    train(tiny_config(every_step, max_steps=8, log_every=1), progress_bar=False)
    loss = {e["step"]: e["train_loss"] for e in training_events(every_step)}
    train(tiny_config(run, max_steps=6, log_every=4), progress_bar=False)
    newest = CheckpointStore(RunPaths(run).checkpoints).latest_loadable()
    assert newest.state["progress"]["log_window"]["steps"] == 2  # steps 5 and 6
    del newest.state["progress"]["log_window"]  # as an older version wrote it
    save_checkpoint(newest.state, newest.path)
    train(tiny_config(run, max_steps=8, log_every=4), resume=True, progress_bar=False)
    logged = {e["step"]: e["train_loss"] for e in training_events(run)}
    assert logged == {4: (loss[1] + loss[2] + loss[3] + loss[4]) / 4, 8: (loss[7] + loss[8]) / 2}


def test_tokens_per_second_leave_validation_time_out(tmp_path, monkeypatch):
    """Each validation takes an hour on the loop's clock: the speed of a window that spans one
    stays the training speed."""
    clock = types.SimpleNamespace(hours=0)
    real_monotonic = loop.time.monotonic
    monkeypatch.setattr(
        loop, "time", types.SimpleNamespace(monotonic=lambda: real_monotonic() + 3600 * clock.hours)
    )
    real_validate = data_parallel.validate_and_checkpoint

    def slow_validation(session):
        clock.hours += 1
        return real_validate(session)

    monkeypatch.setattr(data_parallel, "validate_and_checkpoint", slow_validation)
    run = tmp_path / "run"
    train(tiny_config(run, max_steps=6, log_every=3, validate_every=2), progress_bar=False)
    speeds = [e["tokens_per_s"] for e in metric_events(run, "train_loss")]
    assert clock.hours == 3 and len(speeds) == 2
    assert min(speeds) > 10  # a window's ~300 tokens over an hour would be under 0.1 tokens/s

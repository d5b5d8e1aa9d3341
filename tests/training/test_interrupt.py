"""Interruption as a real process sees it: SIGINT/SIGTERM finish the step, checkpoint, exit 130/143,
and `--resume` (in this process) continues exactly as if nothing had happened."""

import io
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from builders import WIDER, metric_events, tiny_config, tiny_config_file, train_losses
from typer.testing import CliRunner

from tfm.cli import app
from tfm.commands.train import stopping_on_signals
from tfm.training import StopFlag, train
from tfm.training.run_log import collect_run_log

SRC = str(Path(__file__).resolve().parents[2] / "src")
N_STEPS = 40


def tfm(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, "-m", "tfm", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def invoke(*args: str):
    """`tfm ARGS` in this process: resuming needs no process of its own."""
    return CliRunner().invoke(app, list(args))


def wait_for_step(run: Path, step: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"trainer ended early: {proc.communicate()[1]}")
        if (run / "metrics.jsonl").exists() and len(train_losses(run)) >= step:
            return
        time.sleep(0.05)
    proc.kill()
    pytest.fail("trainer did not reach the step in time")


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("straight")
    train(tiny_config(tmp / "run", WIDER, max_steps=N_STEPS), progress_bar=False)
    return train_losses(tmp / "run")


# SIGINT's exit (130) is checked by the tests below; its resume, the same code path as
# SIGTERM's, in the slow run.
@pytest.mark.parametrize(
    ("signum", "code"),
    [pytest.param(signal.SIGINT, 130, marks=pytest.mark.slow), (signal.SIGTERM, 143)],
)
def test_signal_checkpoints_and_resume_matches_uninterrupted(tmp_path, straight, signum, code):
    run = tmp_path / "run"
    config = tiny_config_file(tmp_path, WIDER, max_steps=N_STEPS)
    proc = tfm("train", "--config", str(config), "--no-progress")
    wait_for_step(run, 3, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "Resume with" in err and "--resume" in err
    stopped_at = len(train_losses(run))
    assert 3 <= stopped_at < N_STEPS, "the signal should land mid-run"
    assert (run / "checkpoints" / f"step-{stopped_at:08d}.pt").is_file()

    resumed = invoke("train", "--config", str(config), "--no-progress", "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.stdout.strip() == str(run)
    assert train_losses(run) == straight


def test_the_printed_resume_command_keeps_set_overrides(tmp_path, straight):
    config = tiny_config_file(tmp_path, WIDER, name="unused")  # run_dir and budget from --set
    run = tmp_path / "elsewhere"
    sets = ["--set", f"run_dir={run}", "--set", f"train.max_steps={N_STEPS}"]
    proc = tfm("train", "--config", str(config), *sets, "--no-progress")
    wait_for_step(run, 3, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    command = err.split("Resume with:\n", 1)[1].splitlines()[0].split()
    assert command == ["tfm", "train", "--config", str(run / "config.yaml"), "--resume"]
    resumed = invoke(*command[1:], "--no-progress")
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.stdout.strip() == str(run)
    assert train_losses(run) == straight
    assert not (tmp_path / "unused").exists()


def test_signal_during_validation_stops_after_it(tmp_path):
    run = tmp_path / "run"
    config = tiny_config_file(tmp_path, WIDER, max_steps=N_STEPS, validate_every=1)
    proc = tfm("train", "--config", str(config), "--no-progress")
    wait_for_step(run, 2, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    last_step = metric_events(run)[-1]["step"]
    assert (run / "checkpoints" / f"step-{last_step:08d}.pt").is_file()


class _SignalledMidWrite(io.StringIO):
    """A log file that refuses a write from inside its own write, as Python's buffered files do
    ("reentrant call"), and whose first write is interrupted by SIGINT, as a write to a slow disk
    or a full pipe can be: the signal handler runs inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = self.signalled = False

    def write(self, text: str) -> int:
        if self.inside:
            raise RuntimeError("reentrant call inside the log file")
        self.inside = True
        try:
            if not self.signalled:
                self.signalled = True
                signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
            return super().write(text)
        finally:
            self.inside = False


def test_a_signal_in_the_middle_of_a_log_write_neither_fails_nor_loses_its_message():
    stop = StopFlag()
    stop.training = True
    with collect_run_log() as handler:
        handler.file = log_file = _SignalledMidWrite()
        with stopping_on_signals(stop):
            logging.getLogger("tfm.training").warning("step 3")
        for thread in threading.enumerate():
            if thread.name == "tfm-signal":
                thread.join(timeout=10)
        lines = [line.split(" ", 2)[2] for line in log_file.getvalue().splitlines()]
    assert stop.signal_name == "SIGINT"
    assert lines == [
        "step 3",
        "tfm: SIGINT received: finishing the step and writing a checkpoint (send it again to "
        "stop at once)",
    ]

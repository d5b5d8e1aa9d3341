"""Interruption as a real process sees it: SIGINT/SIGTERM finish the step, checkpoint, exit 130/143,
and `--resume` continues exactly as if nothing had happened."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_run import write_tiny_config

from tfm.config import load_config
from tfm.training import train

SRC = str(Path(__file__).resolve().parents[2] / "src")
N_STEPS = 40


def write_config(tmp_path: Path, run: Path, **train_keys) -> Path:
    train_keys = {"max_steps": N_STEPS, "max_tokens": 1000, "validate_every": 1000, **train_keys}
    return write_tiny_config(
        tmp_path / f"{run.name}.yaml", run, n_train=240, n_eval=8, dropout=0.2, max_len_b=3,
        train=train_keys,
    )  # fmt: skip


def tfm(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, "-m", "tfm", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def losses(run: Path) -> list[tuple[int, float]]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [(e["step"], e["train_loss"]) for e in map(json.loads, lines) if "train_loss" in e]


def wait_for_step(run: Path, step: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"trainer ended early: {proc.communicate()[1]}")
        metrics = run / "metrics.jsonl"
        if metrics.exists() and len(losses(run)) >= step:
            return
        time.sleep(0.05)
    proc.kill()
    pytest.fail("trainer did not reach the step in time")


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("straight")
    train(load_config(write_config(tmp, tmp / "run")), progress_bar=False)
    return losses(tmp / "run")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_checkpoints_and_resume_matches_uninterrupted(tmp_path, straight, signum, code):
    run = tmp_path / "run"
    config = write_config(tmp_path, run)
    proc = tfm("train", "--config", str(config), "--no-progress")
    wait_for_step(run, 3, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "Resume with" in err and "--resume" in err
    stopped_at = len(losses(run))
    assert 3 <= stopped_at < N_STEPS, "the signal should land mid-run"
    assert (run / "checkpoints" / f"step-{stopped_at:08d}.pt").is_file()

    proc = tfm("train", "--config", str(config), "--no-progress", "--resume")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert out.strip() == str(run)
    assert losses(run) == straight


def test_the_printed_resume_command_keeps_set_overrides(tmp_path, straight):
    config = write_config(tmp_path, tmp_path / "unused")  # run_dir and a budget come from --set
    run = tmp_path / "elsewhere"
    sets = ["--set", f"run_dir={run}", "--set", f"train.max_steps={N_STEPS}"]
    proc = tfm("train", "--config", str(config), *sets, "--no-progress")
    wait_for_step(run, 3, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    command = err.split("Resume with:\n", 1)[1].splitlines()[0].split()
    assert command == ["tfm", "train", "--config", str(run / "config.yaml"), "--resume"]
    proc = tfm(*command[1:], "--no-progress")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert out.strip() == str(run)
    assert losses(run) == straight
    assert not (tmp_path / "unused").exists()


def test_signal_during_validation_stops_after_it(tmp_path):
    run = tmp_path / "run"
    config = write_config(tmp_path, run, validate_every=1)
    proc = tfm("train", "--config", str(config), "--no-progress")
    wait_for_step(run, 2, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last_step = events[-1]["step"]
    assert (run / "checkpoints" / f"step-{last_step:08d}.pt").is_file()

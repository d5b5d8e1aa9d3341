"""Soak: SIGKILL a toy run 50 times at random moments (starting up, training, writing files) and
resume it each time; the final weights and optimizer state are bit-identical to an uninterrupted
run's, and nothing torn, non-finite or temporary is left behind. Minutes on a CPU, so marked slow:
`python -m pytest -m slow tests/reliability`."""

import random
import signal
import time

import pytest
import torch
from attack_helpers import invoke, non_finite_files, start_tfm
from builders import tiny_config_file

from tfm.rundir.checkpoint import load_checkpoint
from tfm.rundir.store import CheckpointStore

KILLS = 50
STEPS = 1200


def checkpoints(run) -> set:
    return set((run / "checkpoints").glob("step-*.pt"))


def assert_identical(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key
        elif isinstance(a[key], dict):
            assert_identical(a[key], b[key])
        else:
            assert a[key] == b[key], key


@pytest.mark.slow
def test_fifty_kills_and_resumes_end_bit_identical_to_an_uninterrupted_run(tmp_path):
    keys = {
        "max_steps": STEPS,
        "max_epochs": None,
        "validate_every": 200,
        "checkpoint_every": 1,
        "keep_last": 2,
    }
    straight = tiny_config_file(tmp_path, name="straight", **keys)
    config = tiny_config_file(tmp_path, name="killed", **keys)
    assert invoke("train", "--config", straight, "--no-progress").exit_code == 0
    run, rng = tmp_path / "killed", random.Random(50)
    for _ in range(KILLS):
        resume = bool(checkpoints(run))
        process = start_tfm("train", "--config", config, "--no-progress",
                            "--resume" if resume else "--overwrite")  # fmt: skip
        if rng.random() < 0.2:  # anywhere: importing, opening the run, resuming, training
            time.sleep(rng.uniform(0.0, 4.0))
        else:  # during training: after the next checkpoint, within a few steps and saves
            before, deadline = checkpoints(run), time.monotonic() + 120
            while checkpoints(run) <= before and process.poll() is None:
                assert time.monotonic() < deadline, "no new checkpoint appeared"
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.3))
        assert process.poll() is None, f"the run ended before kill {_ + 1}: raise STEPS"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    latest = CheckpointStore(run / "checkpoints").latest_loadable()
    assert latest is not None and KILLS // 2 < latest.state["step"] < STEPS  # killed mid-run

    final = invoke("train", "--config", config, "--no-progress", "--resume")

    assert final.exit_code == 0, final.stderr
    for name in ("last.pt", f"checkpoints/step-{STEPS:08d}.pt"):
        expected = load_checkpoint(tmp_path / "straight" / name)
        actual = load_checkpoint(run / name)
        assert_identical(actual["model"], expected["model"])
        if "optimizer" in expected:
            assert_identical(actual["optimizer"], expected["optimizer"])
    assert non_finite_files(run) == []
    assert not list(run.rglob(".*tmp*"))

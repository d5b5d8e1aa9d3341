"""One trainer per run directory: a second `tfm train` (plain, --resume or --overwrite) on a live
run is refused naming the holder's PID, a dead trainer's lock is simply taken, and under torchrun
process 0 holds it; a dead peer is one line on the survivor, with the command to resume."""

import os
import signal
import time
from pathlib import Path

import pytest
import torch
from attack_helpers import error_line, invoke, resume, start_tfm
from builders import tiny_config_file
from test_distributed import rank_pid, torchrun


def wait_for(condition, process, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def has_checkpoint(run: Path) -> bool:
    return any((run / "checkpoints").glob("step-*.pt"))


def holder(run: Path) -> str:
    lock = run / ".lock"
    return lock.read_text().strip() if lock.exists() else ""


def test_a_live_run_is_refused_naming_its_pid_and_a_killed_ones_lock_is_taken(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=10**6, max_epochs=None,
                          validate_every=10**5, checkpoint_every=1)  # fmt: skip
    run = tmp_path / "run"
    trainer = start_tfm("train", "--config", config, "--no-progress")
    try:
        wait_for(lambda: holder(run) == str(trainer.pid) and has_checkpoint(run), trainer)
        for flags in (["--resume"], ["--overwrite"], []):
            second = invoke("train", "--config", config, "--no-progress", *flags)
            assert second.exit_code == 1, flags
            line = error_line(second.stderr)
            assert f"{run} is in use by another tfm process (PID {trainer.pid})" in line
        assert trainer.poll() is None and (run / "tokenizer.json").is_file()
    finally:
        trainer.kill()
        trainer.communicate()
    # The time limit as the only budget: a time limit that cuts a step budget short and leaves
    # no usable model fails the command (tfm.commands.train), which is not what is tested here.
    after = resume(run, "train.max_minutes=1e-6", "train.max_steps=null")
    assert after.exit_code == 0, after.stderr
    assert "resumed from" in after.stderr and holder(run) == str(os.getpid())


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds workers via /proc")
@pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs Gloo")
def test_a_killed_torchrun_worker_is_one_line_on_the_survivor(tmp_path):
    # Checkpoints far apart: the worker is killed while the survivor trains, not while it
    # fsyncs a checkpoint, which a busy disk can stall past torchrun's 30 s grace before it
    # SIGKILLs the survivor (the survivor then never gets to say anything).
    config = tiny_config_file(tmp_path, max_steps=10**6, max_epochs=None,
                          validate_every=10**5, checkpoint_every=25, device="cpu")  # fmt: skip
    run = tmp_path / "run"
    command = ("-m", "tfm", "train", "--config", str(config), "--no-progress")
    process = torchrun(*command, logs=tmp_path / "logs")
    try:
        wait_for(lambda: has_checkpoint(run), process)
        assert holder(run) == str(rank_pid(process.pid, 0))  # process 0 alone holds the lock
        os.kill(rank_pid(process.pid, 1), signal.SIGKILL)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    errors = [line for line in stderr.splitlines() if line.startswith("tfm: error: ")]
    assert len(errors) == 1, stderr
    assert "process 0 of 2 lost contact with the other training processes" in errors[0], stderr
    resume = f"--nproc_per_node=2 -m tfm train --config {run / 'config.yaml'} --resume`"
    assert resume in errors[0], stderr
    assert "[rank0]: Traceback" not in stderr and "pair.cc" not in stderr, stderr

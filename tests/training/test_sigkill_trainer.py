"""SIGKILL the real trainer at random moments, ten times: the newest checkpoint always loads, and
`--resume` always continues from it. A minute on a CPU, so marked slow (`python -m pytest -m slow`);
the default run keeps a SIGKILLed checkpoint writer (rundir/test_store.py), the fallback to the
newest good checkpoint (reliability/test_integrity.py) and exact resume after a signal
(test_interrupt.py)."""

import random
import signal
import time

import pytest
from builders import WIDER, tiny_config_file, train_losses
from test_interrupt import tfm

from tfm.rundir.checkpoint import load_checkpoint
from tfm.rundir.store import CheckpointStore

KILLS = 10


@pytest.mark.slow
def test_sigkill_at_random_moments_never_leaves_an_unloadable_checkpoint(tmp_path):
    run = tmp_path / "run"
    # A checkpoint (and last.pt, best.pt) at every second step, so kills land during saves too. No
    # epoch limit: on a fast machine ten runs of up to 1.5 s each passed the default 30 epochs, and
    # the last run finished before it could be killed.
    config = tiny_config_file(
        tmp_path, WIDER, max_steps=10_000, max_epochs=None, validate_every=2, keep_last=2
    )
    rng = random.Random(7)
    resumed_steps = []
    for attempt in range(KILLS):
        args = ["train", "--config", str(config), "--no-progress"]
        proc = tfm(*args, *(["--resume"] if attempt else []))
        before = set((run / "checkpoints").glob("*.pt"))
        deadline = time.monotonic() + 120
        while not set((run / "checkpoints").glob("*.pt")) - before:  # wait for a new one
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no new checkpoint appeared"
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

        latest = CheckpointStore(run / "checkpoints", keep_last=2, keep_best=1).latest_loadable()
        assert latest is not None
        step = latest.state["progress"]["step"]
        assert latest.path.name == f"step-{step:08d}.pt"
        for name in ("last.pt", "best.pt"):
            if (run / name).exists():
                assert load_checkpoint(run / name)["model"]
        resumed_steps.append(step)
    assert resumed_steps == sorted(resumed_steps), "a resume went backwards"
    assert len(set(resumed_steps)) == KILLS, "every resume made progress"
    assert all(loss > 0 for _, loss in train_losses(run))

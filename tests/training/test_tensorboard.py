"""TensorBoard files on a full disk (a file-size limit): one warning, not the writer thread's
traceback too, and the events written before it stay readable."""

import subprocess
import sys

import pytest

CHILD = """
import logging, resource, sys
from pathlib import Path
from tfm.training.tensorboard import TensorBoardLog

logging.basicConfig(level=logging.INFO, format="%(message)s")
resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))  # a few events fit, not thirty
board = TensorBoardLog(Path(sys.argv[1]), resumed_at=None)
for step in range(1, 31):
    board.write({"step": step, "train_loss": 1.0 / step, "lr": 0.001})
board.close()
print("trained on", file=sys.stderr)
"""


def test_a_full_disk_is_one_warning_and_training_goes_on(tmp_path):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    )
    folder = tmp_path / "tensorboard"
    child = subprocess.run([sys.executable, "-c", CHILD, str(folder)], capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert child.returncode == 0, child.stderr
    assert child.stderr.splitlines() == [
        f"TensorBoard files: cannot write to {folder} (File too large); training goes on "
        "without them",
        "trained on",
    ]
    events = event_accumulator.EventAccumulator(str(folder))
    events.Reload()
    steps = [event.step for event in events.Scalars("train_loss")]
    assert steps == list(range(1, len(steps) + 1)) and 0 < len(steps) < 30

"""TensorBoard files on a full disk: one warning, not the writer thread's traceback too, training
goes on, and the events written before it stay readable. A resumed run's file is read after the
files whose steps it replaces, even when it opens in the same second."""

import errno
import logging
import time
import types

import pytest

from tfm.training import tensorboard
from tfm.training.tensorboard import TensorBoardLog

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
record_writer = pytest.importorskip("tensorboard.summary.writer.record_writer")


# pytest reports a thread's unhandled exception as this warning: here an error
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_full_disk_is_one_warning_and_training_goes_on(tmp_path, monkeypatch, capfd, caplog):
    write = record_writer.RecordWriter.write
    written = []

    def fills_the_disk(self, data):  # the file's first records fit, then the disk is full
        if len(written) >= 8:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(data)
        return write(self, data)

    monkeypatch.setattr(record_writer.RecordWriter, "write", fills_the_disk)
    folder = tmp_path / "tensorboard"
    board = TensorBoardLog(folder, resumed_at=None)
    with caplog.at_level(logging.WARNING, logger="tfm"):
        for step in range(1, 31):
            board.write({"step": step, "train_loss": 1.0 / step, "lr": 0.001})
        board.close()
    assert [record.getMessage() for record in caplog.records] == [
        f"TensorBoard files: cannot write to {folder} (No space left on device); training goes "
        "on without them"
    ]
    assert "Traceback" not in capfd.readouterr().err  # the writer thread's, left out
    events = event_accumulator.EventAccumulator(str(folder))
    events.Reload()
    steps = [event.step for event in events.Scalars("train_loss")]
    assert steps == list(range(1, len(steps) + 1)) and 0 < len(steps) < 30


def test_a_resumed_runs_file_is_read_after_the_files_it_replaces(tmp_path):
    folder = tmp_path / "tensorboard"
    first = TensorBoardLog(folder, resumed_at=None)
    for step in (1, 2, 3):
        first.write({"step": step, "train_loss": float(step)})
    first.close()
    # a file of this second whose name sorts after the new writer's (host "~"), as a file of the
    # run cut short does when the resume starts in the same second
    now = int(time.time())
    (folder / f"events.out.tfevents.{now}.~").write_bytes(b"")
    resumed = TensorBoardLog(folder, resumed_at=2)
    resumed.write({"step": 3, "train_loss": 30.0})
    resumed.close()
    assert time.time() >= now + 1
    events = event_accumulator.EventAccumulator(str(folder))
    events.Reload()
    assert [(event.step, event.value) for event in events.Scalars("train_loss")] == [
        (1, 1.0),
        (2, 2.0),
        (3, 30.0),
    ]


def test_a_file_stamped_in_the_future_is_not_waited_for(tmp_path, monkeypatch):
    folder = tmp_path / "tensorboard"
    folder.mkdir()
    (folder / f"events.out.tfevents.{int(time.time()) + 3600}.other-host").write_bytes(b"")
    sleeps: list[float] = []  # the writer's own waits, not its threads' or anyone else's
    clock = types.SimpleNamespace(time=time.time, sleep=sleeps.append)
    monkeypatch.setattr(tensorboard, "time", clock)
    resumed = TensorBoardLog(folder, resumed_at=2)
    resumed.write({"step": 3, "train_loss": 30.0})
    resumed.close()
    assert sleeps == []
    assert len(list(folder.iterdir())) == 2

"""TensorBoard files on a full disk: one warning, not the writer thread's traceback too, training
goes on, and the events written before it stay readable."""

import errno
import logging

import pytest

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

"""Atomic writes survive crashes and full disks: the old file or the new one, never half."""

import errno
import io
import os

import pytest
import torch
from rundir_helpers import assert_one_line_naming

from tfm import atomic
from tfm.atomic import atomic_save, atomic_write_text
from tfm.errors import CheckpointError, DiskFullError, TfmError
from tfm.rundir.checkpoint import load_checkpoint, save_checkpoint


class RaisesWhenPickled:
    def __reduce__(self):
        raise RuntimeError("cannot pickle this")


def fail_fsync(fd: int) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


class FullDisk(io.FileIO):
    """A file on a disk that fills up after its first kilobyte."""

    def write(self, data) -> int:
        if self.tell() + len(data) > 1024:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


@pytest.mark.parametrize("failure", ["pickling", "fsync", "write"])
def test_a_failed_save_keeps_the_previous_checkpoint_and_no_temp_file(
    tmp_path, monkeypatch, failure
):
    path = tmp_path / "model.pt"
    save_checkpoint({"weights": torch.ones(3)}, path)
    new_state = {"weights": torch.zeros(3)}
    if failure == "pickling":
        new_state["bad"] = RaisesWhenPickled()
        save = atomic_save  # save_checkpoint would refuse the object before writing anything
    elif failure == "fsync":
        monkeypatch.setattr(os, "fsync", fail_fsync)
        save = save_checkpoint
    else:
        monkeypatch.setattr(atomic, "open", lambda path, mode: FullDisk(path, "x"), raising=False)
        save = save_checkpoint

    with pytest.raises(TfmError) as error:
        save(new_state, path)

    message = assert_one_line_naming(error.value, path)
    assert error.value.__cause__ is not None
    if failure == "pickling":
        assert isinstance(error.value, CheckpointError)
    else:  # a full disk: which file, and how much space is left
        assert isinstance(error.value, DiskFullError) and error.value.exit_code == 1
        assert "no space left on device" in message and " free on its disk" in message
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["model.pt"]
    assert torch.equal(load_checkpoint(path)["weights"], torch.ones(3))


def test_atomic_write_text_replaces_the_whole_file(tmp_path):
    path = tmp_path / "config.yaml"
    atomic_write_text("a: 1\n" * 100, path)
    atomic_write_text("b: 2\n", path)
    assert path.read_text() == "b: 2\n"
    assert os.listdir(tmp_path) == ["config.yaml"]

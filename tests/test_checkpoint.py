"""Checkpoints survive crashes and full disks, and never run code when loaded."""

import errno
import io
import os
import pickle
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tfm import checkpoint
from tfm.checkpoint import (
    FORMAT_VERSION,
    CorruptCheckpointError,
    atomic_save,
    atomic_write_text,
    load_checkpoint,
    save_checkpoint,
)
from tfm.checkpoint_store import CheckpointStore
from tfm.errors import CheckpointError

HELPER = Path(__file__).with_name("checkpoint_writer.py")


def assert_one_line_naming(error: BaseException, path: Path) -> str:
    message = str(error)
    assert str(path) in message and "\n" not in message, message
    return message


def assert_equal(actual: object, expected: object) -> None:
    """Deep equality where tensors compare by value, dtype and shape."""
    assert type(actual) is type(expected), (type(actual), type(expected))
    if isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype and torch.equal(actual, expected)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected)
        for key in expected:
            assert_equal(actual[key], expected[key])
    elif isinstance(expected, list | tuple):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_equal(a, e)
    else:
        assert actual == expected


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
        monkeypatch.setattr(
            checkpoint, "open", lambda path, mode: FullDisk(path, "x"), raising=False
        )
        save = save_checkpoint

    with pytest.raises(CheckpointError) as error:
        save(new_state, path)

    message = assert_one_line_naming(error.value, path)
    assert error.value.__cause__ is not None
    if failure != "pickling":
        assert "no space left" in message
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["model.pt"]
    assert torch.equal(load_checkpoint(path)["weights"], torch.ones(3))


def test_save_refuses_state_that_weights_only_loading_would_refuse(tmp_path):
    state = {"rng": {"numpy": np.random.get_state()}}
    with pytest.raises(TypeError, match=r"state\['rng'\]\['numpy'\]\[1\] is a numpy.ndarray"):
        save_checkpoint(state, tmp_path / "model.pt")
    assert not (tmp_path / "model.pt").exists()


def test_atomic_write_text_replaces_the_whole_file(tmp_path):
    path = tmp_path / "config.yaml"
    atomic_write_text("a: 1\n" * 100, path)
    atomic_write_text("b: 2\n", path)
    assert path.read_text() == "b: 2\n"
    assert os.listdir(tmp_path) == ["config.yaml"]


def test_a_realistic_training_state_round_trips_under_weights_only(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Embedding(11, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 11)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.98), weight_decay=0.01)
    model(torch.tensor([[1, 2, 3]])).sum().backward()
    optimizer.step()
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": {
            "torch": torch.get_rng_state(),
            "python": random.getstate(),
            "numpy": np.random.default_rng(0).bit_generator.state,
        },
        "step": 1200,
        "epoch": 3,
        "loss": 2.5,
        "lr": 3e-4,
        "best_bleu": float("-inf"),
    }
    save_checkpoint(state, tmp_path / "model.pt")
    draws = (random.random(), torch.rand(3))

    loaded = load_checkpoint(tmp_path / "model.pt")

    assert loaded.pop("format_version") == FORMAT_VERSION
    assert isinstance(loaded.pop("tfm_version"), str)
    assert_equal(loaded, state)
    random.setstate(loaded["rng"]["python"])
    torch.set_rng_state(loaded["rng"]["torch"])
    assert_equal((random.random(), torch.rand(3)), draws)  # resuming repeats the same draws
    optimizer.load_state_dict(loaded["optimizer"])
    model.load_state_dict(loaded["model"])


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("writer", ["torch.save", "pickle", "pickle protocol 2"])
def test_a_checkpoint_that_would_run_code_is_refused_and_the_code_never_runs(tmp_path, writer):
    victim = tmp_path / "created-by-the-checkpoint"

    class CreatesAFile:
        def __reduce__(self):
            if writer == "pickle protocol 2":
                return os.system, (f"touch {shlex.quote(str(victim))}",)
            return open, (str(victim), "w")

    path = tmp_path / "evil.pt"
    payload = {"format_version": 1, "weights": CreatesAFile()}
    if writer == "torch.save":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=2 if "2" in writer else None))

    with pytest.raises(CheckpointError) as error:
        load_checkpoint(path)

    message = assert_one_line_naming(error.value, path)
    assert (
        "refused: it contains objects other than tensors and plain containers, "
        "which could run code when loaded" in message
    )
    assert not victim.exists()


def checkpoint_bytes(tmp_path: Path) -> bytes:
    save_checkpoint({"weights": torch.arange(1000.0), "step": 5}, tmp_path / "good.pt")
    return (tmp_path / "good.pt").read_bytes()


@pytest.mark.parametrize("keep", [0, 1, 10, 0.5, -1])
def test_a_truncated_checkpoint_is_a_one_line_error(tmp_path, keep):
    data = checkpoint_bytes(tmp_path)
    path = tmp_path / "model.pt"
    path.write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(path)
    assert "is truncated or corrupted" in assert_one_line_naming(error.value, path)
    assert "use an earlier checkpoint" in str(error.value)


def test_random_bytes_are_a_one_line_error(tmp_path):
    path = tmp_path / "model.pt"
    for seed in range(20):
        path.write_bytes(random.Random(seed).randbytes(3000))
        with pytest.raises(CheckpointError) as error:
            load_checkpoint(path)
        assert "is truncated or corrupted" in assert_one_line_naming(error.value, path)


def test_corrupted_bytes_either_load_or_raise_checkpoint_error(tmp_path):
    data, path, rng = checkpoint_bytes(tmp_path), tmp_path / "model.pt", random.Random(0)
    for _ in range(100):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 20)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        path.write_bytes(bytes(damaged))
        try:
            assert isinstance(load_checkpoint(path), dict)
        except CheckpointError as error:
            assert_one_line_naming(error, path)


def test_a_missing_file_and_a_foreign_file_are_clear_errors(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.pt")
    torch.save([torch.ones(1)], tmp_path / "list.pt")
    with pytest.raises(CheckpointError, match="is not a tfm checkpoint"):
        load_checkpoint(tmp_path / "list.pt")
    torch.save({"weights": torch.ones(1)}, tmp_path / "plain.pt")
    with pytest.raises(CheckpointError, match="is not a tfm checkpoint"):
        load_checkpoint(tmp_path / "plain.pt")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_missing_device_is_not_mistaken_for_a_corrupted_file(tmp_path):
    save_checkpoint({"weights": torch.ones(2)}, tmp_path / "model.pt")
    with pytest.raises(CheckpointError, match="onto cuda") as error:
        load_checkpoint(tmp_path / "model.pt", map_location="cuda")
    assert not isinstance(error.value, CorruptCheckpointError)


def test_a_checkpoint_from_a_newer_format_is_refused(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"format_version": FORMAT_VERSION + 1, "weights": torch.ones(1)}, path)
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(path)
    message = assert_one_line_naming(error.value, path)
    assert (
        f"was written by a newer tfm (format {FORMAT_VERSION + 1} > {FORMAT_VERSION}); upgrade tfm"
        in message
    )


def save_steps(store: CheckpointStore, scores: dict[int, float | None], **kwargs) -> None:
    for step, score in scores.items():
        store.save({"weights": torch.full((2,), float(step))}, step=step, score=score, **kwargs)


def steps_on_disk(directory: Path) -> list[int]:
    return sorted(int(p.stem.split("-")[1]) for p in directory.glob("step-*.pt"))


def test_rotation_keeps_the_last_and_the_best_and_ignores_non_finite_scores(tmp_path):
    store = CheckpointStore(tmp_path, keep_last=2, keep_best=2, mode="max")
    scores = {1: 0.1, 2: 0.5, 3: float("nan"), 4: 0.3, 5: float("inf"), 6: None, 7: 0.2, 8: 0.25}
    save_steps(store, scores)
    assert steps_on_disk(tmp_path) == [2, 4, 7, 8]  # best two are 0.5 and 0.3; NaN/inf never best
    assert store.best() == tmp_path / "step-00000002.pt"
    assert not list(tmp_path.glob(".*tmp*"))


def test_rotation_in_min_mode_never_deletes_the_best_or_the_protected(tmp_path):
    store = CheckpointStore(tmp_path, keep_last=1, keep_best=1, mode="min")
    save_steps(store, {1: 3.0})
    resumed_from = tmp_path / "step-00000001.pt"
    save_steps(store, {2: 1.0, 3: float("-inf"), 4: 2.0, 5: 1.5}, protect=resumed_from)
    assert steps_on_disk(tmp_path) == [1, 2, 5]
    assert store.best() == tmp_path / "step-00000002.pt"
    save_steps(store, {6: 0.5})  # no longer protected; a new best replaces step 2
    assert steps_on_disk(tmp_path) == [6]


def test_latest_loadable_skips_a_corrupted_newest_and_temporary_files(tmp_path, caplog):
    store = CheckpointStore(tmp_path)
    assert store.latest_loadable() is None
    save_steps(store, {1: 0.1, 2: 0.2, 3: 0.3})
    (tmp_path / "step-00000003.pt").write_bytes(b"PK\x03\x04 torn")
    (tmp_path / ".step-00000004.pt.tmp-1-abcd").write_bytes(b"PK\x03\x04 half written")

    path, state = store.latest_loadable()

    assert path == tmp_path / "step-00000002.pt" and state["step"] == 2
    assert "step-00000003.pt is truncated or corrupted" in caplog.text
    save_steps(store, {4: 0.4})  # the next save clears what killed writers left behind
    assert not list(tmp_path.glob(".*tmp*"))


def test_latest_loadable_raises_rather_than_start_afresh_when_no_checkpoint_loads(tmp_path):
    store = CheckpointStore(tmp_path, keep_last=2)
    save_steps(store, {1: 0.1, 2: 0.2})
    for path in tmp_path.glob("step-*.pt"):
        path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match=r"none of the 2 checkpoints in .* loads") as error:
        store.latest_loadable()
    assert_one_line_naming(error.value, tmp_path)


def test_checkpoints_missing_from_the_index_are_found_by_their_embedded_step_and_score(tmp_path):
    store = CheckpointStore(tmp_path, keep_last=1, keep_best=1)
    save_steps(store, {1: 0.9, 2: 0.1})
    # A crash between writing step 3 and the index, and one written before the index existed.
    save_checkpoint(
        {"weights": torch.full((2,), 3.0), "step": 3, "score": 0.95}, tmp_path / "step-00000003.pt"
    )
    assert store.best() == tmp_path / "step-00000003.pt"
    assert store.latest_loadable().state["step"] == 3
    (tmp_path / "index.json").unlink()
    assert store.best() == tmp_path / "step-00000003.pt"
    save_steps(store, {4: 0.2})
    assert steps_on_disk(tmp_path) == [3, 4]


def test_a_resumed_earlier_run_is_newer_than_the_abandoned_later_checkpoints(tmp_path):
    store = CheckpointStore(tmp_path, keep_last=2, keep_best=1)
    save_steps(store, {10: 0.1, 20: 0.2, 30: 0.3})
    resumed_from = tmp_path / "step-00000020.pt"
    save_steps(store, {21: 0.05}, protect=resumed_from)
    assert store.latest_loadable().path == tmp_path / "step-00000021.pt"
    assert steps_on_disk(tmp_path) == [20, 21, 30]  # 30 stays as the best


def test_an_index_pointing_outside_the_folder_deletes_nothing_there(tmp_path):
    outside = tmp_path / "precious.pt"
    outside.write_bytes(b"keep me")
    run = tmp_path / "run"
    run.mkdir()
    (run / "index.json").write_text(
        '{"checkpoints": [{"file": "../precious.pt", "step": 0, "score": 0}]}'
    )
    save_steps(CheckpointStore(run, keep_last=1, keep_best=1), {1: None, 2: None})
    assert outside.read_bytes() == b"keep me"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork and SIGKILL")
def test_sigkill_at_random_moments_never_leaves_a_torn_checkpoint(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HELPER.parents[1] / "src"), *sys.path])}
    writer = subprocess.Popen(
        [sys.executable, str(HELPER), str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    rng, latest_steps = random.Random(1234), []
    try:
        for _ in range(12):
            writer.stdin.write("go\n")
            writer.stdin.flush()
            child = int(writer.stdout.readline())
            time.sleep(rng.uniform(0.05, 0.6))
            os.kill(child, signal.SIGKILL)
            assert writer.stdout.readline().split() == ["reaped", str(int(signal.SIGKILL))]

            for path in tmp_path.glob("step-*.pt"):  # every visible checkpoint is complete
                state = load_checkpoint(path)
                assert path.name == f"step-{state['step']:08d}.pt"
                assert torch.equal(state["weights"], torch.full((1_000_000,), float(state["step"])))
            latest = CheckpointStore(tmp_path).latest_loadable()
            latest_steps.append(latest.state["step"] if latest else 0)
    finally:
        writer.stdin.close()
        writer.kill()
        writer.wait()
    assert latest_steps == sorted(latest_steps) and latest_steps[-1] > 0, latest_steps

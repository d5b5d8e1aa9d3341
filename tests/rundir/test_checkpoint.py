"""Checkpoints hold only tensors and plain containers, and never run code when loaded."""

import os
import pickle
import random
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch
from rundir_helpers import assert_one_line_naming

from tfm.errors import CheckpointError
from tfm.rundir.checkpoint import (
    FORMAT_VERSION,
    CorruptCheckpointError,
    load_checkpoint,
    save_checkpoint,
)


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


def test_save_refuses_state_that_weights_only_loading_would_refuse(tmp_path):
    state = {"rng": {"numpy": np.random.get_state()}}
    with pytest.raises(TypeError, match=r"state\['rng'\]\['numpy'\]\[1\] is a numpy.ndarray"):
        save_checkpoint(state, tmp_path / "model.pt")
    assert not (tmp_path / "model.pt").exists()


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

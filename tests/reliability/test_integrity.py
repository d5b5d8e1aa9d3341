"""Nothing lost, nothing corrupted: a damaged checkpoint or model file never loads as if whole;
`--resume` falls back to the newest good checkpoint, eval and translate refuse with one line, and
`eval --json` is always valid JSON."""

import json
import math
import random
import shutil

import pytest
import torch
from attack_helpers import (
    error_line,
    flip_bit,
    invoke,
    resume,
    tensor_data_offsets,
)
from builders import tiny_config_file
from shared_runs import copy_run, train_with_tfm

from tfm.atomic import atomic_save
from tfm.commands import decode
from tfm.errors import CheckpointError
from tfm.rundir.checkpoint import CorruptCheckpointError, load_checkpoint


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny run with a checkpoint at every step, 2, 3 and 4 kept: cheap to resume."""
    folder = tmp_path_factory.mktemp("integrity")
    train_with_tfm(folder, max_steps=4, validate_every=2, checkpoint_every=1)
    return folder / "run"


@pytest.fixture
def run(trained, tmp_path):
    """A copy of the trained run (its config naming the copy) that a test may damage."""
    return copy_run(trained, tmp_path / "run")


def same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b or (a != a and b != b)


def test_a_flipped_bit_anywhere_never_loads_as_different_content(run, tmp_path):
    original = run / "checkpoints" / "step-00000004.pt"
    expected, data = load_checkpoint(original), original.read_bytes()
    tensor_bytes = set(tensor_data_offsets(original))
    path, rng = tmp_path / "damaged.pt", random.Random(0)
    for offset in [*rng.sample(sorted(tensor_bytes), 60), *rng.sample(range(len(data)), 120)]:
        path.write_bytes(data)
        flip_bit(path, offset, rng.randrange(8))
        try:
            loaded = load_checkpoint(path)
        except CheckpointError as error:
            assert str(path) in str(error) and "\n" not in str(error)
            continue
        assert offset not in tensor_bytes, f"a flip in tensor data at {offset} loaded"
        assert same(loaded, expected), f"a flip at {offset} loaded as different content"


def test_an_older_file_without_a_digest_is_checked_by_its_zip_crcs(tmp_path):
    state = {"format_version": 1, "weights": torch.arange(1000.0)}
    atomic_save(state, tmp_path / "old.pt")
    assert torch.equal(load_checkpoint(tmp_path / "old.pt")["weights"], state["weights"])
    flip_bit(tmp_path / "old.pt", tensor_data_offsets(tmp_path / "old.pt")[123])
    with pytest.raises(CorruptCheckpointError, match="CRC-32 mismatch in member .*data/0"):
        load_checkpoint(tmp_path / "old.pt")


def test_resume_falls_back_to_the_newest_good_checkpoint(run):
    newest = run / "checkpoints" / "step-00000004.pt"
    flip_bit(newest, tensor_data_offsets(newest)[500], 3)

    result = resume(run, "train.max_steps=5")

    assert result.exit_code == 0, result.stderr
    assert f"skipping checkpoint: checkpoint {newest} is corrupted" in result.stderr
    previous = run / "checkpoints" / "step-00000003.pt"
    assert f"using {previous}, the newest good checkpoint (skipped {newest.name})" in result.stderr
    assert f"resumed from {previous} at step 3" in result.stderr


@pytest.mark.parametrize("command", [["translate", "a dog"], ["eval", "--json"]])
def test_eval_and_translate_refuse_a_corrupted_model_with_one_line(run, command):
    flip_bit(run / "best.pt", tensor_data_offsets(run / "best.pt")[40], 6)
    result = invoke(*command, "--run", run)
    assert result.exit_code == 1 and result.stdout == ""
    line = error_line(result.stderr)
    assert f"checkpoint {run / 'best.pt'} is corrupted (its content does not match" in line


def test_eval_json_writes_non_finite_scores_as_null(run, monkeypatch):
    decoded = decode.evaluate_chunks

    def diverged(*args, **kwargs):
        scores, hypotheses = decoded(*args, **kwargs)
        return {**scores, "loss": math.nan, "perplexity": math.inf}, hypotheses

    monkeypatch.setattr(decode, "evaluate_chunks", diverged)
    result = invoke("eval", "--json", "--run", run)
    assert result.exit_code == 0, result.stderr
    scores = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(name))
    assert scores["loss"] is None and scores["perplexity"] is None
    assert isinstance(scores["bleu"], float)


def test_a_model_file_among_the_checkpoints_is_skipped_by_resume_and_refused_by_average(run):
    planted = run / "checkpoints" / "step-00000009.pt"
    shutil.copy(run / "best.pt", planted)

    average = invoke("average", "--run", run, "--last", "1", "--out", run.parent / "avg")
    assert average.exit_code == 1
    assert f"{planted} is not a training checkpoint" in error_line(average.stderr)
    assert not (run.parent / "avg").exists()
    resumed = resume(run, "train.max_steps=5")
    assert resumed.exit_code == 0, resumed.stderr
    assert f"skipping {planted}: it is a model file (like best.pt)" in resumed.stderr
    assert "at step 4" in resumed.stderr


def test_resume_without_a_checkpoint_suggests_overwrite_and_creates_nothing(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=1)
    result = invoke("train", "--config", config, "--resume")
    assert result.exit_code == 2
    line = error_line(result.stderr)
    assert f"--resume: no complete checkpoint in {tmp_path / 'run' / 'checkpoints'}" in line
    assert "start the run afresh with --overwrite instead" in line
    assert not (tmp_path / "run").exists()

"""Checkpoint averaging gives the element-wise mean, as a run that eval and translate accept."""

import json

import pytest
import torch
from builders import metric_events, tiny_config
from typer.testing import CliRunner

from tfm.cli import app
from tfm.rundir.checkpoint import load_checkpoint
from tfm.rundir.store import CheckpointStore
from tfm.training import train


@pytest.fixture(scope="module")
def run(trained_run):
    """The session's trained run: checkpoints at steps 100, 150 and 200, validated at 100, 200."""
    return trained_run


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_average_of_the_last_three_is_their_mean(run, tmp_path):
    newest = CheckpointStore(run / "checkpoints").newest(3)
    assert [p.name for p in newest] == [f"step-{s:08d}.pt" for s in (100, 150, 200)]
    result = invoke("average", "--run", str(run), "--last", "3", "--out", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(tmp_path / "a")
    averaged = load_checkpoint(tmp_path / "a" / "best.pt")["model"]
    states = [load_checkpoint(p)["model"] for p in newest]
    for name, tensor in averaged.items():
        expected = sum(s[name].double() for s in states) / 3
        torch.testing.assert_close(tensor, expected.float(), rtol=0, atol=1e-7)
    assert not torch.equal(averaged["decoder.layers.0.feed_forward.w_1.weight"],
                           states[-1]["decoder.layers.0.feed_forward.w_1.weight"])  # fmt: skip
    scores = json.loads(invoke("eval", "--run", str(tmp_path / "a"), "--json").stdout)
    assert scores["sentences"] == 60


def test_average_of_one_is_that_checkpoint(run, tmp_path):
    invoke("average", "--run", str(run), "--last", "1", "--out", str(tmp_path / "one"))
    averaged = load_checkpoint(tmp_path / "one" / "best.pt")["model"]
    newest = load_checkpoint(CheckpointStore(run / "checkpoints").newest(1)[0])["model"]
    assert all(torch.equal(averaged[k], newest[k]) for k in newest)


def test_asking_for_more_than_kept_is_a_usage_error(run, tmp_path):
    result = invoke("average", "--run", str(run), "--last", "9", "--out", str(tmp_path / "x"))
    assert result.exit_code == 2 and "fewer than 9" in result.stderr
    result = invoke("average", "--run", str(run), "--out", str(tmp_path / "x"))
    assert result.exit_code == 2 and "plans no averaging (train.average_last: 1)" in result.stderr
    both = ("--last", "2", "--best", "2")
    result = invoke("average", "--run", str(run), *both, "--out", str(tmp_path / "x"))
    assert result.exit_code == 2 and "exactly one of --last N or --best N" in result.stderr


def test_checkpoint_every_adds_unscored_checkpoints_between_validations(tmp_path):
    run = tmp_path / "run"
    train(tiny_config(run, max_steps=7, validate_every=5, checkpoint_every=2, keep_last=9),
          progress_bar=False)  # fmt: skip
    index = json.loads((run / "checkpoints" / "index.json").read_text())["checkpoints"]
    assert [(c["step"], c["score"] is not None) for c in index] == [
        (2, False), (4, False), (5, True), (6, False), (7, True)
    ]  # fmt: skip
    validated = [event["step"] for event in metric_events(run, "val_bleu")]
    assert validated == [5, 7]
    assert load_checkpoint(run / "checkpoints" / "step-00000004.pt")["progress"]["step"] == 4


def tied_groups(weights: dict) -> list[list[str]]:
    """Names that share one tensor, in groups of two or more."""
    groups: dict[int, list[str]] = {}
    for name, tensor in weights.items():
        groups.setdefault(tensor.untyped_storage().data_ptr(), []).append(name)
    return sorted(names for names in groups.values() if len(names) > 1)


def test_the_averaged_model_keeps_tied_weights_tied_and_stored_once(run, tmp_path):
    # The shared embeddings and the output projection are one tensor: averaged apart, they would
    # be written three times and the file would grow by two embedding tables.
    invoke("average", "--run", str(run), "--last", "3", "--out", str(tmp_path / "a"))
    groups = tied_groups(load_checkpoint(run / "best.pt")["model"])
    assert groups and len(groups[0]) == 3  # source, target embedding and output projection
    assert tied_groups(load_checkpoint(tmp_path / "a" / "best.pt")["model"]) == groups
    size, averaged_size = ((r / "best.pt").stat().st_size for r in (run, tmp_path / "a"))
    assert averaged_size == pytest.approx(size, rel=0.02)

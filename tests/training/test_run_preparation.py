"""What a run directory says before training starts: a finished run of the same config (budget
reached, however its last checkpoint fell), an unfinished one, or a failed start to replace."""

import signal

import pytest
from builders import tiny_config

from tfm.errors import UsageError
from tfm.rundir.paths import RunPaths
from tfm.rundir.store import CheckpointStore
from tfm.training import StopFlag, train
from tfm.training.run_preparation import check_run_dir, finished_run


def test_a_run_validated_at_its_last_step_is_finished_by_its_epochs(tmp_path):
    config = tiny_config(tmp_path / "run", max_epochs=1, validate_every=1)
    result = train(config, progress_bar=False)
    newest = CheckpointStore(RunPaths(tmp_path / "run").checkpoints).latest_loadable()
    assert newest.state["progress"]["epoch"] == 1  # saved again once the epoch was counted
    assert newest.state["score"] is not None and newest.state["step"] == result.steps
    assert finished_run(config) == (
        f"{tmp_path / 'run'}: already trained with this config ({result.steps} steps, stopped by "
        "train.max_epochs); use --resume to train further or --overwrite to start again"
    )
    how_to_run = tiny_config(tmp_path / "run", max_epochs=1, validate_every=1, threads=2)
    assert finished_run(how_to_run) is not None
    assert finished_run(tiny_config(tmp_path / "run", max_epochs=2, validate_every=1)) is None


def test_an_interrupted_run_is_not_finished_and_is_not_replaced(tmp_path):
    config = tiny_config(tmp_path / "run", max_steps=5)
    stop = StopFlag()
    stop.request(signal.SIGTERM)  # as if a signal came during the first step
    assert train(config, progress_bar=False, stop=stop).steps == 1
    assert finished_run(config) is None
    with pytest.raises(UsageError, match="already exists; use --resume to continue it"):
        check_run_dir(RunPaths(tmp_path / "run"), config, resume=False, overwrite=False)

"""The last-run pointer finds the run trained from a folder; a missing or empty run is a clear
usage error."""

import pytest

from tfm.errors import UsageError
from tfm.rundir.paths import RunPaths, find_run, remember_run


def test_the_run_remembered_from_a_folder_is_found_from_there_only(tmp_path):
    run, here, elsewhere = tmp_path / "run", tmp_path / "here", tmp_path / "elsewhere"
    for folder in (run, here, elsewhere):
        folder.mkdir()
    (run / "last.pt").write_bytes(b"")
    remember_run(run, cwd=here)

    assert find_run(None, cwd=here) == RunPaths(run.resolve())
    assert find_run(str(run), cwd=elsewhere) == RunPaths(run)
    with pytest.raises(UsageError, match="no run given and none trained from this directory"):
        find_run(None, cwd=elsewhere)


def test_a_missing_run_and_a_run_without_a_model_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match=f"run directory {tmp_path / 'nope'} does not exist"):
        find_run(tmp_path / "nope")
    with pytest.raises(UsageError, match=r"has no trained model \(best.pt or last.pt\)"):
        find_run(tmp_path)

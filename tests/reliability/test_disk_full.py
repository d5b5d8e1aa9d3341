"""A full disk (or a file-size limit) anywhere: one line naming the file and the space left, exit
1, every file as it was before the failed write, and the run resumes once there is space. A line
torn by a crash is dropped on resume; temporary files of killed writers are removed."""

import errno
import os

import pytest
from attack_helpers import error_line, invoke, resume, resume_args, run_tfm
from builders import metric_events
from shared_runs import copy_run, train_with_tfm

from tfm import atomic
from tfm.data.tokenizer import Tokenizer
from tfm.errors import DiskFullError
from tfm.rundir import metrics
from tfm.rundir.manifest import MANIFEST_FILE
from tfm.rundir.metrics import append_event

LIMIT = 8000  # bytes: the tokenizer, config and a short metrics log fit, a checkpoint does not


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny run of 2 steps, validated at the end."""
    folder = tmp_path_factory.mktemp("disk-full")
    train_with_tfm(folder, max_steps=2, validate_every=2)
    return folder / "run"


@pytest.fixture
def run(trained, tmp_path):
    """A copy of the tiny run (its config naming the copy), this test's own."""
    return copy_run(trained, tmp_path / "run")


def whole_events(run) -> list[dict]:
    """The run's metric events, failing on a torn line: one that does not parse, or a last line
    cut just before its newline."""
    assert (run / "metrics.jsonl").read_bytes().endswith(b"\n"), "a torn last line"
    return metric_events(run)


def resume_past_the_limit(run, *sets: str) -> str:
    """Resume `run` in a child process whose files may not grow past LIMIT; its error line."""
    code, _, stderr = run_tfm(*resume_args(run, *sets), file_size_limit=LIMIT)
    assert code == 1
    return error_line(stderr)


def logged_steps(run) -> list[int]:
    return [e["step"] for e in whole_events(run) if "train_loss" in e]


def test_a_full_disk_while_appending_metrics_leaves_no_torn_line(run):
    # The resume records its settings in config.yaml and manifest.json; nothing else changes.
    files = [p for p in run.rglob("*") if p.suffix in (".pt", ".json") and p.name != MANIFEST_FILE]
    before = {p: p.read_bytes() for p in files}
    # No checkpoint until step 1000, so the metrics log is the file that grows past the limit.
    line = resume_past_the_limit(run, "train.max_steps=1000", "train.validate_every=1000")

    assert f"cannot write {run / 'metrics.jsonl'}: file larger than this process may write" in line
    assert " free on its disk" in line
    assert run.joinpath("metrics.jsonl").stat().st_size <= LIMIT
    assert whole_events(run)[-1]["step"] > 2
    assert {p: p.read_bytes() for p in before} == before
    resumed = resume(run, "train.max_steps=3")
    assert resumed.exit_code == 0, resumed.stderr
    assert logged_steps(run) == [1, 2, 3]


def test_a_full_disk_while_writing_a_checkpoint_keeps_the_previous_ones(run):
    line = resume_past_the_limit(run, "train.max_steps=4", "train.checkpoint_every=1")

    assert f"cannot write {run / 'checkpoints' / 'step-00000003.pt'}: file larger" in line
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "index.json",
        "step-00000002.pt",
    ]
    assert invoke("eval", "--run", run).exit_code == 0


def test_a_failed_append_takes_back_the_part_of_the_line_it_wrote(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    append_event(path, {"step": 1, "train_loss": 2.0})
    written = os.write

    def half_then_full(fd: int, data) -> int:
        if len(data) > 10:
            return written(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(metrics.os, "write", half_then_full)
    with pytest.raises(DiskFullError) as error:
        append_event(path, {"step": 2, "train_loss": 1.5})
    message = str(error.value)
    assert f"cannot write {path}: no space left on device (" in message
    assert " free on its disk); free some space and run again" in message
    assert path.read_text() == '{"step": 1, "train_loss": 2.0}\n'


def test_resume_drops_a_line_torn_by_a_crash_and_says_so(run):
    with (run / "metrics.jsonl").open("a") as file:
        file.write('{"step": 3, "train_loss": 1.2, "l')  # the writer died here

    result = resume(run, "train.max_steps=3")

    assert result.exit_code == 0, result.stderr
    assert "metrics.jsonl:" in result.stderr
    assert "dropped a line that is not JSON (" in result.stderr
    assert logged_steps(run) == [1, 2, 3]


def test_a_full_disk_while_saving_the_tokenizer_keeps_the_old_one(run, monkeypatch):
    tokenizer = Tokenizer.load(run)
    before = (run / "tokenizer.json").read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(DiskFullError, match=r"tokenizer.json: no space left on device \("):
        tokenizer.save(run)
    assert (run / "tokenizer.json").read_bytes() == before
    assert not [p.name for p in run.iterdir() if ".tmp" in p.name]


def test_temporary_files_of_killed_writers_are_removed_at_the_next_start(run):
    leftovers = [run / ".last.pt.tmp-4194301-0a1b2c3d", run / ".tokenizer.json.tmp-7-0a1b2c3e",
                 run / "checkpoints" / ".step-00000003.pt.tmp-4194301-deadbeef"]  # fmt: skip
    for path in leftovers:
        path.write_bytes(b"half a file")

    result = resume(run, "train.max_steps=3")

    assert result.exit_code == 0, result.stderr
    assert not any(path.exists() for path in leftovers)
    assert "removed 2 temporary file(s) left by an interrupted write: " in result.stderr
    assert not list(run.rglob(".*tmp*"))

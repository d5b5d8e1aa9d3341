"""Step checkpoints rotate (newest and best kept), resume from the newest that loads, and are
never left torn by a SIGKILL."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from rundir_helpers import assert_one_line_naming

from tfm.errors import CheckpointError
from tfm.rundir.checkpoint import load_checkpoint, save_checkpoint
from tfm.rundir.store import CheckpointStore, finite_score

HELPER = Path(__file__).with_name("checkpoint_writer.py")


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
    with pytest.raises(
        CheckpointError, match=r"none of the 2 checkpoints in .* is usable"
    ) as error:
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


@pytest.mark.slow  # a soak; test_atomic checks the same writes deterministically
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork and SIGKILL")
def test_sigkill_at_random_moments_never_leaves_a_torn_checkpoint(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HELPER.parents[2] / "src"), *sys.path])}
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


def test_only_finite_numbers_count_as_scores():
    assert finite_score(0.5) == 0.5
    assert finite_score(2) == 2.0 and type(finite_score(2)) is float
    for not_a_score in (float("nan"), float("inf"), float("-inf"), None, True, "0.5"):
        assert finite_score(not_a_score) is None, not_a_score

"""Fixtures shared across test folders: the runs trained once for the session, and test settings.

Tiny configs come from `builders` (`tiny_config`, `tiny_config_file`, `tiny_settings`); runs that
many tests read are trained once (`shared_runs`): `trained_run`, `both_ways_run`, the export
tests' `toy_run`, and `copy_of_trained_run` for a test that resumes or damages one.
"""

import contextlib
import json
import os
import sys
from pathlib import Path

# Bytecode is kept (in the checkout's ignored __pycache__ folders) even where
# PYTHONDONTWRITEBYTECODE is set: without it every pytest-xdist worker rewrites the asserts of every
# test module and compiles tfm again when it collects (about 3 s more of each worker's start), and
# every process the tests start compiles tfm again. Set before tfm and the helpers below are
# imported, so that they are kept too.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import pytest  # noqa: E402
import torch  # noqa: E402
from shared_runs import DONE, SHARED_RUNS, copy_run, shared_run  # noqa: E402
from tiny_models import single_thread, train_copy_model  # noqa: E402

from tfm.transformer import Transformer  # noqa: E402

# One thread in every test process and in the processes tests start: the models are tiny, and when
# processes share the cores (pytest-xdist's workers, torchrun's, anyone else's) threads that wait
# on each other make small ops many times slower.
os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def shared_runs_first(request, scratch_cwd, tmp_path_factory):
    """Under pytest-xdist, each worker first builds its share of the shared runs the collected
    tests need (worker i the i-th, wrapping round), so that they are built side by side and no
    worker sits idle waiting for another's build; a worker with no share builds nothing. Every
    worker collects every test, so each sees the same list."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count:
        return
    needed = [name for name in SHARED_RUNS
              if any(name in item.fixturenames for item in request.session.items)]  # fmt: skip
    for name in needed[int(worker.removeprefix("gw")) :: int(count)]:
        shared_run(tmp_path_factory, name)


@pytest.fixture(scope="session", autouse=True)
def scratch_cwd(tmp_path_factory):
    """Every test starts in a scratch folder of this session (of this worker, under
    pytest-xdist), not in the checkout: training remembers its run in the current folder's
    .tfm/, and a test that writes a relative path writes there."""
    with contextlib.chdir(tmp_path_factory.mktemp("cwd")):
        yield


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> Path:
    """A run trained by `tfm train` for 200 steps on 3000 toy pairs (builders.TRAINED): it
    translates the toy grammar (validation BLEU about 25); validated at steps 100 and 200, with
    checkpoints at 100, 150 and 200. Read it, never change it: copy it (`copy_of_trained_run`) to
    resume or damage it. Its folder also holds the config it was trained from (run.yaml)."""
    return shared_run(tmp_path_factory, "trained_run")


@pytest.fixture(scope="session")
def trained_run_output(trained_run) -> dict:
    """What `tfm train` of `trained_run` wrote: "stdout", "stderr", and "peak_mib", the peak
    memory of the process that trained it, measured right after training."""
    return json.loads((trained_run.parent / DONE).read_text(encoding="utf-8"))


@pytest.fixture
def copy_of_trained_run(trained_run, tmp_path) -> Path:
    """A copy of `trained_run` at tmp_path/run, its config.yaml naming it: this test's own."""
    return copy_run(trained_run, tmp_path / "run")


@pytest.fixture(scope="session")
def both_ways_run(tmp_path_factory) -> Path:
    """The trained run's recipe trained both ways in every epoch for 300 steps: a model of de→en
    as well as en→de (BLEU near 20 and 35), whose config says so. Read it, never change it."""
    return shared_run(tmp_path_factory, "both_ways_run")


@pytest.fixture(scope="session")
def related_run(tmp_path_factory) -> Path:
    """A run trained into two made-up languages, `aa` (the main pair: the English words in
    capitals) and `bb` (each word with a `z` at its end), its test files of both beside it
    (`shared_runs.build_related`): read it, never change it."""
    return shared_run(tmp_path_factory, "related_run")


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory) -> Path:
    """A run trained on the toy corpus to where its greedy translations are real sentences
    (`shared_runs.build_export_toy`), which the export tests export: read it, never change it."""
    return shared_run(tmp_path_factory, "toy_run")


@pytest.fixture
def progress_totals(monkeypatch) -> list:
    """The `total` of each progress bar training opens (what it plans to train), recorded."""
    from tfm.training import progress

    totals = []

    class RecordingBar(progress.tqdm):
        def __init__(self, *args, total=None, **kwargs):
            totals.append(total)
            super().__init__(*args, total=total, **kwargs)

    monkeypatch.setattr(progress, "tqdm", RecordingBar)
    return totals


@pytest.fixture
def full_float32():
    """float32 matrix products in full float32 on a GPU (no TF32), so that CUDA and CPU results
    differ by rounding alone (the CUDA tests)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


@pytest.fixture(scope="session")
def copy_model() -> Transformer:
    """A small model trained to copy its source, once for all the decoding tests."""
    with single_thread():
        return train_copy_model()

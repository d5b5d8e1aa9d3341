"""Data-parallel training under torchrun, on CPU with Gloo and 2 processes (and as 2 nodes of
one process each, on this host: a run directory both see, or one each).

The reference is one process with train.accumulate=2: its optimizer step takes the same two
consecutive global batches that the two processes share, so both runs must agree (to float
tolerance) step for step: gradients, weights, losses, after a resume and after a signal.
"""

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from builders import WIDER, tiny_config_file, train_losses

from tfm.config import load_config
from tfm.data.batching import steps_in_epoch
from tfm.errors import UsageError
from tfm.rundir.checkpoint import load_checkpoint
from tfm.training import loop, train
from tfm.training.data_parallel import shard
from tfm.training.distributed import SHARED, Replicas, _open_here, from_environment, said_once

pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
    reason="needs torch.distributed with Gloo",
)

SRC = str(Path(__file__).resolve().parents[2] / "src")
WORKER = str(Path(__file__).with_name("ddp_worker.py"))
N_STEPS = 20  # the reference run; 6 batches an epoch, so 3 steps an epoch either way


# The wider tiny model without dropout on 160 pairs, one step, every checkpoint kept; on the CPU
# (Gloo) everywhere: a machine with one GPU cannot give two processes one each.
DATA_PARALLEL = {
    "data": {"toy": {"n_train": 160, "n_validation": 4, "n_test": 4}},
    "model": {"dropout": 0.0},
    "train": {"max_steps": 1, "max_tokens": 800, "validate_every": 1, "device": "cpu",
              "keep_last": N_STEPS + 5, "clip_norm": None},
    "decoding": {"max_len_b": 2},
}  # fmt: skip


def write_config(folder: Path, **train_keys) -> Path:
    """The config of the run folder/run, as folder/run.yaml."""
    return tiny_config_file(folder, WIDER, DATA_PARALLEL, **train_keys)


def torchrun(*args: str, logs: Path) -> subprocess.Popen:
    """2 processes of `args` under torchrun, whose agent keeps its logs in `logs` (by default it
    makes a folder in the system's temporary directory and leaves it there)."""
    path = SRC + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               f"--log-dir={logs}"]  # fmt: skip
    return subprocess.Popen(
        [*command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def losses(run: Path) -> list[float]:
    return [loss for _, loss in train_losses(run)]


def weights_at(run: Path, step: int) -> dict:
    return load_checkpoint(run / "checkpoints" / f"step-{step:08d}.pt")["model"]


def assert_close(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(comparable(key, a), comparable(key, b), rtol=1e-4, atol=1e-6)


def comparable(key: str, weights: dict) -> torch.Tensor:
    """The weights without the key biases (the middle third of w_qkv.bias): softmax ignores a
    shift shared by all keys, so their gradient is zero in exact arithmetic and only rounding
    noise, which Adam scales up to full-size steps that differ with the summation order."""
    value = weights[key]
    if key.endswith("w_qkv.bias"):
        d_model = value.numel() // 3
        return torch.cat([value[:d_model], value[2 * d_model :]])
    return value


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One process, accumulate=2: step 1's gradients, then checkpoints of steps 1..N_STEPS."""
    tmp = tmp_path_factory.mktemp("reference")
    sessions = []
    opened = loop.open_session_everywhere
    loop.open_session_everywhere = lambda *a, **k: sessions.append(opened(*a, **k)) or sessions[-1]
    try:
        train(load_config(write_config(tmp, accumulate=2)), progress_bar=False)
    finally:
        loop.open_session_everywhere = opened
    grads = {k: q.grad.clone() for k, q in sessions[0].model.named_parameters()}
    config = write_config(tmp, accumulate=2, max_steps=N_STEPS)
    train(load_config(config), resume=True, progress_bar=False)
    return tmp / "run", grads


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """One step with 2 processes; each saved its weights and gradients."""
    tmp = tmp_path_factory.mktemp("ddp")
    proc = torchrun(WORKER, str(write_config(tmp)), str(tmp), logs=tmp / "logs")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert [p.name for p in (tmp / "logs").glob("*/attempt_0")] == ["attempt_0"]  # logs kept here
    assert "each optimizer step takes 2 processes × 1 accumulated = 2 batches" in err
    ranks = [torch.load(tmp / f"rank{r}.pt") for r in (0, 1)]
    return tmp / "run", ranks


def test_one_step_equals_one_process_on_the_union_of_the_batches(reference, two_processes):
    reference_run, reference_grads = reference
    run, (rank0, rank1) = two_processes
    for key in ("weights", "grads"):
        assert rank0[key].keys() == rank1[key].keys()
        assert all(torch.equal(rank0[key][k], rank1[key][k]) for k in rank0[key]), key
    assert_close(rank0["grads"], reference_grads)  # loss / all target tokens of the step
    assert_close(weights_at(run, 1), weights_at(reference_run, 1))
    assert losses(run) == pytest.approx(losses(reference_run)[:1], rel=1e-5)
    # Torn down in reverse order: DDP's reducer is gone before its process group is destroyed.
    assert rank0["ddp_alive_at_destroy"] == rank1["ddp_alive_at_destroy"] == [0]


def rank_pid(parent: int, rank: int) -> int:
    """The pid of the torchrun worker with RANK=`rank` among `parent`'s children."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            environ = (stat.parent / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and f"RANK={rank}".encode() in environ:
            return int(stat.parent.name)
    pytest.fail(f"no worker with RANK={rank} under pid {parent}")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds workers via /proc")
def test_resume_continues_and_a_signal_to_one_rank_stops_both(tmp_path, reference, two_processes):
    run = tmp_path / "run"
    shutil.copytree(two_processes[0], run)
    config = write_config(tmp_path, max_steps=N_STEPS)
    command = ("-m", "tfm", "train", "--config", str(config), "--resume", "--no-progress")
    proc = torchrun(*command, logs=tmp_path / "logs")
    deadline = time.monotonic() + 120
    while len(losses(run)) < 3:  # the copied run has step 1's; wait for two more
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    os.kill(rank_pid(proc.pid, 1), signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "resumed from" in err and "at step 1 " in err
    assert "interrupted by SIGINT" in err, err
    stopped_at = len(losses(run))
    assert 3 <= stopped_at < N_STEPS, "the signal should land mid-run"
    assert out.count(str(run)) <= 1
    reference_run = reference[0]
    assert losses(run) == pytest.approx(losses(reference_run)[:stopped_at], rel=1e-4)
    assert_close(weights_at(run, stopped_at), weights_at(reference_run, stopped_at))


def test_a_checkpoint_of_two_processes_resumes_on_one(tmp_path, reference, two_processes, caplog):
    run = tmp_path / "run"
    shutil.copytree(two_processes[0], run)
    config = write_config(tmp_path, max_steps=5, accumulate=2)
    with caplog.at_level(logging.INFO, logger="tfm"):
        train(load_config(config), resume=True, progress_bar=False)
    assert "written by 2 process(es), this run has 1" in caplog.text
    assert "effective batch changes" not in caplog.text  # 2 × 1 = 1 × 2 batches a step
    assert losses(run) == pytest.approx(losses(reference[0])[:5], rel=1e-4)
    assert_close(weights_at(run, 5), weights_at(reference[0], 5))


@pytest.mark.parametrize(("world_size", "accumulate"), [(1, 1), (1, 3), (2, 1), (3, 2)])
def test_sharding_covers_the_epoch_once_but_a_tail_shorter_than_the_world(world_size, accumulate):
    batches = [[i] for i in range(11)]
    seen, position, steps = [], 0, 0
    while position < len(batches):
        shares = [shard(batches, position, accumulate=accumulate, rank=r, world_size=world_size)
                  for r in range(world_size)]  # fmt: skip
        assert len({consumed for _, consumed in shares}) == 1
        if shares[0][0]:
            assert all(group for group, _ in shares), "every process gets a batch, or none does"
            seen += sorted(b for group, _ in shares for b in group)
            steps += 1
        position += shares[0][1]
    assert seen == batches[: len(seen)]
    assert len(batches) - len(seen) < world_size
    assert steps == steps_in_epoch(len(batches), accumulate=accumulate, world_size=world_size)
    if world_size == 1:  # one process: the single-process loop's groups, unchanged
        assert steps == -(-len(batches) // accumulate)


def test_without_torchrun_there_is_one_process():
    assert not from_environment({}).active
    replicas = from_environment({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"})
    assert (replicas.world_size, replicas.rank, replicas.local_rank) == (4, 3, 1)
    assert not replicas.is_main


@pytest.mark.parametrize(("rank", "said"), [("0", True), ("1", False)])
def test_what_every_process_reads_alike_is_said_by_process_0_only(
    tmp_path, monkeypatch, caplog, rank, said
):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", rank)
    empty = tmp_path / "c.yaml"
    empty.write_text("", encoding="utf-8")
    level = logging.getLogger("tfm").level
    with said_once():
        load_config(empty)
    assert any("is empty: every key" in r.getMessage() for r in caplog.records) == said
    assert logging.getLogger("tfm").level == level


def test_a_process_other_than_0_says_nothing_of_the_data(tmp_path, caplog):
    """Every process reads the data; process 0 names its mistakes (here a validation split
    that is the training corpus), the others only build their replica."""
    from tfm.training.session_opening import open_session

    pairs = [(f"ich sehe {n} hunde", f"i see {n} dogs") for n in range(150)]
    for lang, side in (("de", 0), ("en", 1)):
        text = "".join(pair[side] + "\n" for pair in pairs)
        (tmp_path / f"corpus.{lang}").write_text(text, encoding="utf-8")
    corpus = {"format": "text", "path": str(tmp_path / "corpus")}
    data = {"src_lang": "de", "tgt_lang": "en", "train": corpus, "validation": corpus}
    config = load_config(write_config(tmp_path, max_steps=1), [f"data={data}"])

    def data_warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.levelno >= logging.WARNING and r.name.startswith("tfm.data")]  # fmt: skip

    with caplog.at_level(logging.INFO, logger="tfm"):
        train(config, progress_bar=False)  # as process 0: it prepares the run directory
        assert any("training sources too" in w for w in data_warnings())
        caplog.clear()
        open_session(config, resume=True, overwrite=False, rank=1, world_size=2)
        assert data_warnings() == []


def test_a_process_that_does_not_see_the_run_directory_says_what_is_needed(tmp_path):
    config = load_config(write_config(tmp_path))  # nothing prepared there: as on another node
    with pytest.raises(UsageError) as refused:
        _open_here(Replicas(rank=1, world_size=2), config, resume=False, overwrite=False)
    assert str(refused.value) == (
        f"process 1 of 2 does not see the run directory {tmp_path / 'run'} that process 0 "
        f"prepared (no tokenizer.json there): {SHARED}"
    )
    assert "file system every node sees" in SHARED


def node(rank: int, config: Path, port: int, logs: Path) -> subprocess.Popen:
    """Node `rank` of two, one process each, under torchrun on this host, as on two machines:
    node 0's agent is the rendezvous at 127.0.0.1:`port`."""
    path = SRC + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
               f"--node_rank={rank}", "--master_addr=127.0.0.1", f"--master_port={port}",
               f"--log-dir={logs / str(rank)}", "-m", "tfm", "train", "--config", str(config),
               "--no-progress"]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip


def two_nodes(configs: tuple[Path, Path], logs: Path) -> list[tuple[int, str]]:
    """Both nodes' exit codes and the tfm lines of their stderr."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    started = [node(rank, config, port, logs) for rank, config in enumerate(configs)]
    errors = [proc.communicate(timeout=300)[1] for proc in started]
    return [(proc.returncode, err) for proc, err in zip(started, errors, strict=True)]


@pytest.mark.slow
def test_two_nodes_train_in_a_run_directory_both_see_and_stop_in_one_line_otherwise(tmp_path):
    for folder in ("shared", "a", "b"):
        (tmp_path / folder).mkdir()
    shared = write_config(tmp_path / "shared")
    for code, err in two_nodes((shared, shared), tmp_path / "logs"):
        assert code == 0, err
    assert len(losses(tmp_path / "shared" / "run")) == 1  # one step, by two processes
    apart = (write_config(tmp_path / "a"), write_config(tmp_path / "b"))  # each node its own
    (main_code, main_err), (other_code, other_err) = two_nodes(apart, tmp_path / "logs-apart")
    assert main_code != 0 and other_code != 0
    assert [line for line in main_err.splitlines() if line.startswith("tfm: ")] == [
        f"tfm: error: another process does not see the run directory {tmp_path / 'a' / 'run'} "
        f"that process 0 prepared: {SHARED}"
    ]
    assert [line for line in other_err.splitlines() if line.startswith("tfm: ")] == [
        f"tfm: error: process 1 of 2 does not see the run directory {tmp_path / 'b' / 'run'} "
        f"that process 0 prepared (no tokenizer.json there): {SHARED}"
    ]

"""Encoding on every core (`tfm.data.cache.parallel_encoding`): worker processes write the very
entry one process writes, and end with the parent, whether it stops reading or is killed."""

import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_cache import config_for, write_corpus

from tfm.data.cache import entry_encoding, parallel_encoding
from tfm.data.cache.parallel_encoding import Encoding, workers_for
from tfm.data.cache.prepared_cache import prepared_entry
from tfm.data.tokenizer import Tokenizer

FILES = ["src.ids", "src.ids-offsets.npy", "tgt.ids", "tgt.ids-offsets.npy"]


def test_worker_processes_write_the_entry_one_process_writes(tmp_path, monkeypatch):
    prefix = write_corpus(tmp_path / "data", 500, extra=[("der  Hund (7)", "\u2581DOG 7.")])
    alone = prepared_entry(config_for(tmp_path / "one", prefix))
    monkeypatch.setattr(parallel_encoding, "PARALLEL_ROWS", 100)
    monkeypatch.setattr(parallel_encoding, "MAX_WORKERS", 2)
    monkeypatch.setattr(parallel_encoding.os, "sched_getaffinity", lambda pid: {0, 1})
    assert workers_for(99) == 1 and workers_for(501) == 2
    monkeypatch.setattr(entry_encoding, "CHUNK", 64)  # 8 chunks a side, in 2 processes
    pooled = prepared_entry(config_for(tmp_path / "two", prefix))
    assert alone.path != pooled.path
    for name in FILES:
        assert (pooled.path / name).read_bytes() == (alone.path / name).read_bytes(), name
    assert pooled.meta["tokens"] == alone.meta["tokens"]


def test_a_parent_that_stops_reading_stops_its_workers(tmp_path):
    prefix = write_corpus(tmp_path / "data", 300)
    entry = prepared_entry(config_for(tmp_path, prefix))
    models = dict(zip(("src", "tgt"), Tokenizer.load(entry.path).bpe_models, strict=True))
    with Encoding(models, Path(entry.path), workers=2) as encoding:
        first, lengths = next(encoding.chunks("src", size=10))  # of 30 chunks
        assert len(multiprocessing.active_children()) == 2
    assert multiprocessing.active_children() == []
    ids = np.fromfile(entry.path / "src.ids", dtype=entry.meta["dtypes"]["src"])
    assert first.tolist() == [i for i in ids[: int(lengths.sum()) + 10] if i != 2]  # EOS framed


KILLED_PARENT = """
import multiprocessing, sys, time
from pathlib import Path
from tfm.data.cache.parallel_encoding import Encoding
from tfm.data.tokenizer import Tokenizer
models = dict(zip(("src", "tgt"), Tokenizer.load(Path(sys.argv[1])).bpe_models))
with Encoding(models, Path(sys.argv[1]), workers=2) as encoding:
    next(encoding.chunks("src", size=10))
    print(*[p.pid for p in multiprocessing.active_children()], flush=True)
    time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_parent_killed_outright_takes_its_workers_with_it(tmp_path):
    prefix = write_corpus(tmp_path / "data", 300)
    entry = prepared_entry(config_for(tmp_path, prefix))
    parent = subprocess.Popen(
        [sys.executable, "-c", KILLED_PARENT, str(entry.path)], stdout=subprocess.PIPE, text=True
    )
    workers = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(workers) == 2 and all(alive(pid) for pid in workers)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in workers)


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, ended but not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

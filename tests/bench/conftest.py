"""The `script` fixture of the bench scripts' quick runs (`bench_reports.numbers` reads their
printed figures)."""

import importlib
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def script(monkeypatch, tmp_path):
    """Import a bench script by name (bench/ on the path), in a scratch working directory, with
    torch's thread count put back afterwards (the decoding scripts set it)."""
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    yield importlib.import_module
    torch.set_num_threads(threads)

"""The reliability tests reuse the tiny-run and torchrun helpers of tests/training, and run in
their temporary folder (training remembers the last run in the current folder's .tfm/)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

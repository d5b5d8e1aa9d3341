"""Device helpers: the precision `auto` picks and the peak memory a run reports."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tfm
from tfm import device as device_module
from tfm.device import resolve_precision, training_precision

SRC = str(Path(tfm.__file__).parents[1])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS from /proc")
def test_peak_memory_grows_by_what_a_process_touches():
    code = (
        "import re, torch; from tfm.device import peak_memory_mib as peak\n"
        "cpu = torch.device('cpu'); status = open('/proc/self/status').read()\n"
        "rss = int(re.search(r'VmRSS:\\s+(\\d+) kB', status).group(1)) / 1024\n"
        "before = peak(cpu); x = torch.ones(256 * 2**20 // 4); after = peak(cpu)\n"
        "print(rss, before, after)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")},
    ).stdout  # fmt: skip
    rss, before, after = map(float, out.split())
    # 256 MiB of ones, every page written, on top of what was resident: the peak includes both
    assert rss + 250 <= after <= max(before, rss + 256) + 16


@pytest.mark.parametrize("device", ["cpu", "cuda", "mps"])
def test_decoding_precision_auto_is_float32_on_every_device_and_bf16_only_when_asked_for(device):
    device = torch.device(device)
    assert resolve_precision("auto", device) == torch.float32
    assert resolve_precision("fp32", device) == torch.float32
    assert resolve_precision("bf16", device) == torch.bfloat16


@pytest.mark.parametrize("bf16_capable", [True, False])
def test_training_precision_auto_is_bf16_only_on_a_cuda_gpu_that_computes_in_it(
    monkeypatch, bf16_capable
):
    monkeypatch.setattr(device_module, "cuda_bf16_supported", lambda: bf16_capable)
    cuda, cpu, mps = torch.device("cuda"), torch.device("cpu"), torch.device("mps")
    assert training_precision("auto", cuda) == (torch.bfloat16 if bf16_capable else torch.float32)
    assert training_precision("auto", cpu) == training_precision("auto", mps) == torch.float32
    assert training_precision("fp32", cuda) == torch.float32
    assert training_precision("bf16", cpu) == torch.bfloat16


def test_the_start_log_names_the_training_precision(tmp_path, caplog):
    from builders import tiny_config

    from tfm.training import train

    with caplog.at_level(logging.INFO, logger="tfm.training.session"):
        train(tiny_config(tmp_path / "run", max_steps=1, device="cpu"), progress_bar=False)
    assert "precision: fp32 (train.precision auto) on cpu" in caplog.text

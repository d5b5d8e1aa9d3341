"""Device helpers: the precision `auto` picks and the peak memory a run reports."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tfm
from tfm.device import resolve_precision

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
def test_auto_precision_is_float32_on_every_device_and_bf16_only_when_asked_for(device):
    # bf16 autocast measured slower than float32 for tfm's models on a CPU and on an H100
    device = torch.device(device)
    assert resolve_precision("auto", device) == torch.float32
    assert resolve_precision("fp32", device) == torch.float32
    assert resolve_precision("bf16", device) == torch.bfloat16

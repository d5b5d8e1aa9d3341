"""Device helpers: the peak memory a run reports."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tfm


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
        env={**os.environ, "PYTHONPATH": str(Path(tfm.__file__).parents[1])},
    ).stdout  # fmt: skip
    rss, before, after = map(float, out.split())
    # 256 MiB of ones, every page written, on top of what was resident: the peak includes both
    assert rss + 250 <= after <= max(before, rss + 256) + 16

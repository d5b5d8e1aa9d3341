"""bench/cold_start.py --quick: whole-process timings of `tfm translate` against `import torch`,
reported as seconds and their ratio, and the heavy modules translation imported (none)."""

import importlib
import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_cold_start_reports_seconds_a_ratio_and_no_unneeded_imports(monkeypatch, tmp_path, capsys):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.chdir(tmp_path)
    importlib.import_module("cold_start").main(["--quick"])
    out = capsys.readouterr().out
    translate = re.search(r'tfm translate "[^"]+": median ([\d.]+) s \(([\d.]+)-([\d.]+)\)', out)
    torch_only = re.search(r"python -c 'import torch': median ([\d.]+) s", out)
    ratio = re.search(r"translate / import torch: ([\d.]+)x \(([\d.]+)-([\d.]+), n=2\)", out)
    assert translate and torch_only and ratio, out
    low, high = float(ratio.group(2)), float(ratio.group(3))
    assert 0 < low <= float(ratio.group(1)) <= high
    assert float(translate.group(2)) <= float(translate.group(1)) <= float(translate.group(3))
    assert float(torch_only.group(1)) > 0
    assert "unneeded modules imported: none" in out
    assert "(2 pairs of fresh processes, interleaved)" in out

"""bench/decode_memory.py --quick: the peak memory of fresh `tfm translate --file` and `tfm eval
--src --ref` processes at two input sizes, each against the smaller size's."""

import importlib
import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_decode_memory_reports_each_commands_peak_and_its_ratio(monkeypatch, tmp_path, capsys):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.chdir(tmp_path)
    rows = importlib.import_module("decode_memory").main(["--quick"])
    out = capsys.readouterr().out
    assert [row["lines"] for row in rows] == [200, 2000]
    for name in ("translate", "eval"):
        small, large = (row[name]["peak_mib"] for row in rows)
        assert 100 < small < 4000 and 100 < large < 4000  # a Python process with torch
        ratio = re.search(rf"{name} +2,000 lines: peak +(\d+) MiB, ([\d.]+)x of 200 lines", out)
        assert ratio, out
        assert int(ratio.group(1)) == round(large)
        assert float(ratio.group(2)) == round(large / small, 3)
    assert 0 <= rows[1]["eval"]["bleu"] <= 100

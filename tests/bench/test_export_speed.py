"""bench/export_speed.py --quick on the export tests' shared run: every engine, search and thread
count gets a row with a positive rate, and the CTranslate2 float32 export scores tfm's own BLEU
with less memory."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2")

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "export_speed.py"


def test_quick_mode_reports_every_row(toy_run, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("export_speed", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    table = bench.main(["--quick", "--run", str(toy_run), "--json", str(tmp_path / "table.json")])
    rows = {(row["engine"], row["search"], row["threads"]): row for row in table}
    assert sorted(rows) == sorted(
        (engine, search, threads)
        for engine in ("tfm", "ct2-float32", "ct2-int8")
        for search in ("greedy", "beam 5")
        for threads in (1, 2)
    )
    assert all(row["sentences_per_s"] > 0 and row["ratio"] > 0 for row in table)
    assert rows[("tfm", "greedy", 1)]["ratio"] == 1.0
    for search in ("greedy", "beam 5"):  # the same translations, so the same BLEU
        assert rows[("ct2-float32", search, 1)]["bleu"] == rows[("tfm", search, 1)]["bleu"]
    assert rows[("ct2-int8", "greedy", 1)]["peak_mib"] < rows[("tfm", "greedy", 1)]["peak_mib"]
    printed = capsys.readouterr().out
    assert "20 sentences, 1 round(s)" in printed and (tmp_path / "table.json").is_file()

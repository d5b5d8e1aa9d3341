"""bench/serve_load.py --quick on the shared trained run: a row for each engine and client count,
every request answered with 200 (no errors, none lost), latencies in order, and the server's
SIGTERM exit checked."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2")
pytest.importorskip("uvicorn")

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "serve_load.py"


def test_quick_mode_answers_every_request(trained_run, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = importlib.util.spec_from_file_location("serve_load", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.main(["--quick", "--run", str(trained_run), "--json", str(tmp_path / "rows.json")])
    assert [(row["engine"], row["clients"]) for row in rows] == [
        ("torch", 1), ("torch", 4), ("int8", 1), ("int8", 4)
    ]  # fmt: skip
    for row in rows:
        assert row["answered"] == 6 * row["clients"] and row["errors"] == row["lost"] == 0
        assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
        assert row["sentences_per_s"] > 0 and row["vs_one_client"] > 0
    assert [row["vs_one_client"] for row in rows if row["clients"] == 1] == [1.0, 1.0]
    assert "| engine | clients | answered | sentences/s | x 1 client |" in capsys.readouterr().out

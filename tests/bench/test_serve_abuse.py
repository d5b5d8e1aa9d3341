"""bench/serve_abuse.py --quick on the shared trained run: a row for each phase, no normal
request failed and each p99 within its goal while the idle connections were held, the heavy
requests answered, the malformed ones refused with their statuses, and beside the crowd of
heavy requests and the client over the connection cap; the crowd answered or refused in time,
none timed out; the requests over the cap answered 503; no answer 500; a short server log and
exit 0 on SIGTERM."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "serve_abuse.py"


def test_quick_mode_meets_every_goal(trained_run, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = importlib.util.spec_from_file_location("serve_abuse", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.main(["--quick", "--run", str(trained_run)])
    rows = {row["phase"]: row for row in result["rows"]}
    assert list(rows) == ["none", "idle", "heavy", "malformed", "crowd"]
    for row in rows.values():
        assert row["answered"] > 0 and row["failed"] == 0
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        assert row["goal_ms"] is None or row["p99_ms"] < row["goal_ms"]
    assert rows["idle"]["abuse"]["held"] == 1000
    assert rows["heavy"]["abuse"]["heavy 200"] > 0
    assert {"400", "403", "413", "415", "left"} <= set(rows["malformed"]["abuse"])
    crowd = rows["crowd"]["abuse"]
    assert crowd["held"] == bench.CAP + 50 and crowd["over the cap: 503"] > 0
    assert crowd["heavy 200"] + crowd.get("heavy 503 busy", 0) == 15  # each of the crowd
    assert crowd.get("slowest refusal ms", 0) < 1000 and "heavy 503 timed out" not in crowd
    assert not [kind for row in rows.values() for kind in row["abuse"] if " 500" in kind]
    assert result["exit_code"] == 0 and result["log_lines"] < 100 and result["goals_met"]
    assert not [line for line in result["log"] if "Traceback" in line]
    assert "| phase | normal answered | failed |" in capsys.readouterr().out

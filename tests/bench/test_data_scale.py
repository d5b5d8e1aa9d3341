"""bench/data_scale.py --quick: two tiny synthetic corpora measured end to end, as the full
benchmark measures its big ones."""

import importlib.util
import math
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "data_scale.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_data_scale", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_lexicon_drawn_at_once_is_the_one_drawn_word_by_word():
    """The corpora stay the same words as when each word's letters were drawn in turn, so that
    figures measured before and after compare."""
    bench = load_bench()
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzäöüß"))
    at_once = np.random.default_rng(7)
    by_word = np.random.default_rng(7)
    expected = ["".join(by_word.choice(letters, k)) for k in by_word.integers(2, 12, 2_000)]
    assert bench._lexicon(at_once, letters, 2_000).tolist() == expected
    assert at_once.integers(0, 10**9) == by_word.integers(0, 10**9)  # and the draws go on alike


def test_quick_report_has_a_row_per_size_and_a_fit(tmp_path, capsys):
    bench = load_bench()
    result = bench.main(["--quick", "--work", str(tmp_path)])
    rows = result["rows"]
    assert [row["pairs"] for row in rows] == [500, 1_500]
    for row in rows:
        assert row["check_pairs"] == row["pairs"]  # the check read the whole training split
        assert row["cold_wrote_cache"] and not row["warm_wrote_cache"]
        assert row["warm_data_s"] < row["cold_data_s"]
        assert 0 < row["prepare_s"] and set(row["phases_s"]) == {"read", "bpe", "encode"}
        assert row["cold_peak_mib"] > 0 and row["warm_peak_mib"] > 0 and row["cache_mb"] > 0
        assert row["cold_tree_mib"] >= row["cold_peak_mib"]  # with any worker processes
    assert rows[1]["cache_mb"] > rows[0]["cache_mb"]
    assert set(result["fit"]) == set(bench.FITTED)
    assert all(math.isfinite(line["at_target"]) for line in result["fit"].values())
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["pairs", "text_mb", "prepare_s"]
    assert table[1].split()[0] == "500" and table[3].split()[0] == "1,500"
    assert table[5].startswith("fit (a + b · pairs), at 4,500,000 pairs:")

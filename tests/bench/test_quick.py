"""Every benchmark script's --quick run (a tiny model on the toy corpus, seconds), in this process:
each must finish through tfm's public functions and print its report with plausible values.
Reports are ratios and shares measured in the run, so nothing here times anything itself."""

import re
from pathlib import Path

import pytest
from bench_reports import numbers, tfm_in_process

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_train_speed(script, capsys):
    script("train_speed").main(["--quick"])
    out = capsys.readouterr().out
    share, batches = numbers(r"\(b\) real tokens in training batches: ([\d.]+)% over (\d+)", out)
    assert 50 < share <= 100 and batches >= 5
    (steps,) = numbers(r"\(a, c\) 2 epochs over 300 training pairs, (\d+) steps an epoch", out)
    assert steps == batches  # the same toy split at the same budget
    assert len(re.findall(r"epoch \d end: RSS \d+ MiB, peak \d+ MiB", out)) == 2
    (outside,) = numbers(r"outside forward/loss/backward/clip/optimizer: median ([\d.]+)%", out)
    assert 0 <= outside < 100
    (speed,) = numbers(r"bf16 / fp32 speed: ([\d.]+)x", out)
    assert speed > 0
    fp32, bf16 = numbers(r"validation loss after 6 steps .*: fp32 ([\d.]+), bf16 ([\d.]+)", out)
    assert 0 < fp32 < 10 and abs(bf16 - fp32) < 0.05 * fp32
    assert "profile of one step (self CPU time)" in out and "aten::" in out
    (model,) = numbers(
        r"\(f\) model FLOPs utilisation, 6 float32 steps .*: model ([\d.]+) GFLOP/s", out
    )
    (peak,) = numbers(r"float32 matmul peak \(256x256, .*\): median ([\d.]+) GFLOP/s", out)
    # The share is the median of per-step ratios (each step against the peak measured after
    # it), not the ratio of the medians, which a load that changes mid-run pulls apart.
    share, ratio, q1, q3, n = numbers(
        r"share of the measured peak: ([\d.]+)% \(([\d.]+)x \(([\d.]+)-([\d.]+), n=(\d+)\)", out
    )
    assert 0 < model and 0 < peak and n == 6 and q1 <= ratio <= q3
    assert share == pytest.approx(100 * ratio, abs=0.6)  # printed to 1 and 2 decimals


def test_decode_speed(script, capsys):
    script("decode_speed").main(["--quick"])
    out = capsys.readouterr().out
    sentences, mean = numbers(r"greedy: (\d+) sentences, mean output ([\d.]+) tokens", out)
    assert sentences == 24 and 1 <= mean <= 1.5 * 40 + 10
    assert "ids identical" in out
    (cached,) = numbers(r"cached / uncached: ([\d.]+)x \(", out)
    (beam,) = numbers(r"beam time / greedy time: ([\d.]+)x \(", out)
    assert cached > 0 and beam > 0


def test_model_speed(script, capsys):
    script("model_speed").main(["--quick"])
    out = capsys.readouterr().out
    (training,) = numbers(r"ratio ours/nn: median ([\d.]+)x over 2 paired runs", out)
    (decoding,) = numbers(r"ratio cached/uncached: median ([\d.]+)x over 2 paired runs", out)
    assert training > 0 and decoding > 0
    assert "(identical ids)" in out


def test_multi30k(script, capsys, monkeypatch, tmp_path):
    """The whole script on a tiny toy run; its `tfm` commands run in this process."""
    bench = script("multi30k")
    monkeypatch.setattr(bench, "tfm", tfm_in_process)
    bench.main(["--quick", "--runs", str(tmp_path / "runs")])
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("| direction | decoding | BLEU (cased, sacreBLEU) |")
    assert [row.split(" | ")[:2] for row in rows[2:]] == [
        ["| en→de", "greedy"],
        ["| en→de", "beam 3"],
    ]
    for row in rows[2:]:
        cells = row.strip("| ").split(" | ")
        bleu, lowercase, chrf, minutes = (float(cells[i].split()[0]) for i in (2, 3, 4, 5))
        assert 0 <= bleu <= 100 and 0 <= lowercase <= 100 and 0 < chrf <= 100
        assert "nrefs:1" in cells[2] and 0 <= minutes < 5 and re.fullmatch(r"[\d.]+M", cells[7])


def test_multi30k_names_the_missing_copy_and_how_to_give_it(script, monkeypatch, tmp_path):
    bench = script("multi30k")
    monkeypatch.setenv("TFM_MULTI30K", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit, match=r"Multi30k not found at .*nowhere; give --data DIR"):
        bench.main(["--runs", str(tmp_path)])
    elsewhere = tmp_path / "elsewhere"
    with pytest.raises(SystemExit, match=r"Multi30k not found at .*elsewhere;"):
        bench.main(["--data", str(elsewhere), "--runs", str(tmp_path)])  # --data wins


def test_no_benchmark_or_doc_names_a_machine_path():
    root = BENCH.parent
    files = [*BENCH.glob("*.py"), *BENCH.glob("*.md"), *root.glob("docs/*.md"), root / "README.md"]
    found = [
        f"{path.relative_to(root)}:{number}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"(?<![\w.])/(work|root|home)/", line)
    ]
    assert found == []


def test_every_script(script, capsys):
    script("every_script").main(["--quick"])
    out = capsys.readouterr().out
    unknown_off, unknown_on, exact_off, exact_on = numbers(
        r"pair en-ja.*\n.*<unk> rate ([\d.]+)% without byte fallback, ([\d.]+)% with; exact "
        r"round trips ([\d.]+)% / ([\d.]+)%",
        out,
    )
    assert unknown_off > 0 and unknown_on == 0 and exact_off < 100 and exact_on == 100
    (toy_unknown,) = numbers(
        r"pair en-de.*\n.*<unk> rate [\d.]+% without byte fallback, ([\d.]+)%", out
    )
    assert toy_unknown == 0
    runs, characters = (
        numbers(rf"cut into {way} first: ([\d.]+)x the tokens", out)[0]
        for way in ("script runs", "characters")
    )
    assert 1 <= runs < characters  # whole sentences give the fewest pieces, characters the most


def test_backtranslation(script, capsys):
    speeds, memories = script("backtranslation").main(["--quick"])
    out = capsys.readouterr().out
    assert [row["round"] for row in speeds] == [1, 2]
    (ratio,) = numbers(r"generation / translate --file: ([\d.]+)x \(median of 2\)", out)
    assert ratio > 0
    assert [row["lines"] for row in memories] == [2_000, 20_000]
    small, large = (row["peak_mib"] for row in memories)
    (shown,) = numbers(r"prepare +20,000 lines: peak \d+ MiB, ([\d.]+)x of 2,000 lines", out)
    assert 50 < small < 4000 and shown == round(large / small, 2)

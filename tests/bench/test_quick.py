"""Every benchmark script's --quick run (a tiny model on the toy corpus, seconds), in this process:
each must finish through tfm's public functions and print its report with plausible values.
Reports are ratios and shares measured in the run, so nothing here times anything itself."""

import importlib
import json
import math
import re
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tfm.cli import app

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def script(monkeypatch, tmp_path):
    """Import a bench script by name (bench/ on the path), in a scratch working directory, with
    torch's thread count put back afterwards (the decoding scripts set it)."""
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    yield importlib.import_module
    torch.set_num_threads(threads)


def numbers(pattern: str, text: str) -> list[float]:
    """The groups of `pattern`'s first match in `text`, as numbers (fails when it is missing)."""
    found = re.search(pattern, text)
    assert found, f"no line matches {pattern!r} in:\n{text}"
    return [float(group) for group in found.groups()]


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

    def tfm_here(*args: str) -> str:
        result = CliRunner().invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.stdout.strip()

    monkeypatch.setattr(bench, "tfm", tfm_here)
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


def test_gpu_speed(script, capsys, tmp_path):
    """The one command of every GPU figure, on the CPU with tiny models: each part reports."""
    figures_file = tmp_path / "figures.json"
    script("gpu_speed").main(["--quick", "--json", str(figures_file)])
    out = capsys.readouterr().out
    fp32, bf16 = numbers(
        r"\(a\) measured matmul peak .*: fp32 ([\d.]+) TFLOP/s, bf16 ([\d.]+)", out
    )
    assert fp32 > 0 and bf16 > 0
    figures = json.loads(figures_file.read_text())
    for model in ("multi30k_model", "base_model"):
        rows = figures[model]
        for variant in ("fp32", "fp32 packed", "bf16", "bf16 packed", "bf16 static"):
            row = rows[variant]
            assert row["median_step_ms"] > 0 and row["tokens_per_s"] > 0
            # MFU: the model FLOP/s over the peak measured in the same run
            peak = figures["matmul_peak_tflops"][variant.split()[0]]
            assert row["mfu_measured_peak"] == pytest.approx(row["model_tflops_per_s"] / peak)
        assert rows["fp32"]["speed_against_fp32"] == 1.0
        losses = rows["validation_loss"]
        assert 0 < losses["fp32"] < 10
        for variant in ("bf16", "bf16 packed"):
            assert abs(losses[variant] - losses["fp32"]) < 0.05 * losses["fp32"]
    recipe = figures["recipe"]
    assert recipe["steps"] == 60 and recipe["wall_s"] > 0
    assert 0 < recipe["training_s"] < recipe["wall_s"]  # the steps, by the run's own log
    for decoding in ("greedy", "beam 5"):
        assert 0 <= recipe[decoding]["bleu"] <= 100 and recipe[decoding]["sentences_per_second"] > 0
    assert "left out" not in out and "failed" not in out


def test_gpu_round(script, capsys, tmp_path):
    """The GPU round's parts, each in its own process, on the CPU with tiny models: the CUDA
    tests (skipped), the kernels, the steps and one `tfm train` run, summed up in files."""
    out = tmp_path / "out"
    script("gpu_round").main(["--quick", "--out", str(out)])
    assert sorted(p.name for p in out.iterdir()) == [
        "cuda_tests.txt", "gpu_kernels.json", "gpu_kernels.txt", "gpu_speed.json",
        "gpu_speed.txt", "summary.json", "train_runs.txt",
    ]  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["outcomes"].values()) == {"ok"}
    run = summary["tfm_train_runs"]["base_gpu"]
    assert run["log_lines"] == 2 and run["median_step_ms"] > 0 and run["median_tokens_per_s"] > 0
    assert len(summary["goals"]) == 6
    kernels = json.loads((out / "gpu_kernels.json").read_text())
    for row in kernels["attention"].values():  # each layout and precision
        assert row["flash_only"] == "runs" and row["events_ms"]  # the CPU's fused kernel
    assert kernels["loss"]["whole logits"]["speed_against_whole_logits"] == 1.0
    assert kernels["loss"]["fused, eager softmax"]["median_ms"] > 0
    assert "multi30k_model" in json.loads((out / "gpu_speed.json").read_text())
    assert "skipped" in (out / "cuda_tests.txt").read_text() or torch.cuda.is_available()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_precision(script, capsys):
    script("cuda_precision").main(["--quick"])
    out = capsys.readouterr().out
    for shapes in ("first-seen", "repeated"):
        assert f"{shapes} shapes, 4 steps" in out
    speeds = [float(x) for x in re.findall(r"speed against fp32 ([\d.]+)x", out)]
    assert len(speeds) == 6 and all(s > 0 and math.isfinite(s) for s in speeds)
    assert "bf16 attention kernels, cuDNN off:" in out


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


def test_pairs(script, capsys, monkeypatch):
    """Training runs as a process of its own (the competing load needs one); the other
    commands (config show, average, eval) run in this process, as `tfm` would run them."""
    bench = script("pairs")

    def tfm_here(*args: str, log) -> str:
        result = CliRunner().invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.stdout.strip()

    monkeypatch.setattr(bench, "tfm", tfm_here)
    bench.main(["--quick", "--variants", "derived", "--sweep", "train.lr=2x",
                "--load", "start", "--runs", "runs"])  # fmt: skip
    out = capsys.readouterr().out
    rows = re.findall(
        r"^\| en-de \| (\S+) \| 0 \| (.+?) \| (\d+) \| (\d+) \| (\d+)% \| ([\d.]+) \| "
        r"([\d.]+) \| ([\d.]+) \| ([\d.]+) \|",
        out,
        re.M,
    )
    assert [row[0] for row in rows] == ["derived", "train.lr=0.004"] * 2  # as they come, then all
    for _variant, plan, planned, steps, used, lr_end, bleu, chrf, unk in rows:
        assert "vocab 1000" in plan and "beam 5" in plan and int(planned) >= int(steps) >= 1
        assert int(used) > 0 and 0 < float(lr_end) <= 1
        assert 0 <= float(bleu) <= 100 and 0 <= float(chrf) <= 100 and float(unk) == 0
    assert "lr 0.002" in rows[0][1] and "lr 0.004" in rows[1][1]  # twice the derived rate
    assert "budget: 0.05 minutes on 1 thread(s) a run" in out


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

"""The GPU benchmarks' --quick runs, on the CPU with tiny models (the CUDA parts skip without a
GPU): each part reports, and every figure file is written. On a GPU the CUDA-only benchmark runs
too."""

import json
import math
import re

import pytest
import torch
from bench_reports import numbers


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
    tests (left out without a GPU), the kernels, the steps and one `tfm train` run, summed up in
    files. The kernels part is `gpu_kernels.py --quick` itself, so its figures are checked here."""
    out = tmp_path / "out"
    script("gpu_round").main(["--quick", "--out", str(out)])
    assert sorted(p.name for p in out.iterdir()) == [
        "cuda_tests.txt", "gpu_kernels.json", "gpu_kernels.txt", "gpu_speed.json",
        "gpu_speed.txt", "summary.json", "train_runs.txt",
    ]  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    cuda = summary["outcomes"].pop("cuda tests")
    assert cuda == ("ok" if torch.cuda.is_available() else "left out: torch finds no CUDA GPU here")
    assert set(summary["outcomes"].values()) == {"ok"}
    run = summary["tfm_train_runs"]["base_gpu"]
    assert run["log_lines"] == 2 and run["median_step_ms"] > 0 and run["median_tokens_per_s"] > 0
    assert len(summary["goals"]) == 6
    check_kernels(json.loads((out / "gpu_kernels.json").read_text()),
                  (out / "gpu_kernels.txt").read_text())  # fmt: skip
    assert "multi30k_model" in json.loads((out / "gpu_speed.json").read_text())
    assert ("no CUDA GPU" in (out / "cuda_tests.txt").read_text()) != torch.cuda.is_available()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_precision(script, capsys):
    script("cuda_precision").main(["--quick"])
    out = capsys.readouterr().out
    for shapes in ("first-seen", "repeated"):
        assert f"{shapes} shapes, 4 steps" in out
    speeds = [float(x) for x in re.findall(r"speed against fp32 ([\d.]+)x", out)]
    assert len(speeds) == 6 and all(s > 0 and math.isfinite(s) for s in speeds)
    assert "bf16 attention kernels, cuDNN off:" in out


def check_kernels(figures: dict, out: str) -> None:
    """gpu_kernels.py --quick on the CPU: each layout and precision's attention events, and
    whether the step runs on the flash kernel alone (the CPU's fused kernel: it does); the fused
    loss against the whole logits, interleaved."""
    assert sorted(figures["attention"]) == ["bf16 packed", "bf16 padded", "fp32 packed",
                                            "fp32 padded"]  # fmt: skip
    for name, row in figures["attention"].items():
        assert row["flash_only"] == "runs", name
        assert row["events_ms"] and all(ms >= 0 for ms in row["events_ms"].values())
        assert f"{name}: flash alone: runs" in out
    loss = figures["loss"]
    assert sorted(loss) == ["fused, eager softmax", "whole logits"]  # no CPU compilation
    assert loss["whole logits"]["speed_against_whole_logits"] == 1.0
    assert all(row["median_ms"] > 0 and row["speed_against_whole_logits"] > 0
               for row in loss.values())  # fmt: skip
    (tokens, words) = numbers(r"\(b\) the loss of (\d+) tokens over (\d+) words", out)
    assert (tokens, words) == (300, 200)

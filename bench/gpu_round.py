r"""Every figure of tfm's GPU goals in one run of under 8 minutes on one H100 or H200, each part
in its own process, everything written to files in --out:

    cuda_tests.txt      the CUDA tests (left out where torch finds no GPU)
    gpu_kernels.*       bench/gpu_kernels.py: the attention kernels of each layout and precision
                        (flash proven by allowing it alone), the fused loss against whole logits
    gpu_speed.*         bench/gpu_speed.py: steps of the Multi30k and the base model, float32 and
                        bf16, padded, packed and static, with MFU and the validation loss; and
                        (c) the de→en recipe trained to its end and scored on test2016
    train_runs.txt      the logs of `tfm train` runs: 200 steps of configs/base_gpu.yaml, and
                        configs/multi30k_gpu.yaml compiled with static shapes (CUDA graphs)
    summary.json        each `tfm train` run's median step_ms, tokens/s and MFU from its
                        metrics.jsonl, and each goal with the figure measured for it

Parts run in that order (the base run before the recipe, the compiled run last), each cut to
what is left of --budget-minutes; one that fails or runs out of time is recorded so and the next
runs. On a GPU machine that reaches no package index and gets only the checkout, put the
Multi30k files in .data/multi30k/ and the wheels it lacks in .whl/ (both ignored by git, listed
in .git/info/exclude), carry both, and run:

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site:src python3 bench/gpu_round.py --data .data/multi30k --out "$OUT"

    python bench/gpu_round.py --quick --out DIR    # CPU, tiny models (tests)

The CUDA tests (tests/transformer/test_cuda.py, test_cuda_packing.py,
tests/training/test_cuda_training.py) run where a GPU is present and are skipped elsewhere. They
check forward and gradients, the fused losses in float32 and bf16, the fused attention kernels,
packed batches on the variable-length kernels (flash alone in bf16), greedy and beam outputs and
training steps against the CPU, evaluation of a GPU-trained run on the CPU, tied weights stored
once, and that cuDNN's attention kernel stays off. The same figures by hand, alone on the GPU:

    python -m pytest -q tests/transformer/test_cuda.py tests/transformer/test_cuda_packing.py \
        tests/training/test_cuda_training.py
    python bench/gpu_speed.py --data DIR --json figures.json
    python bench/cuda_precision.py --steps 60
    python bench/train_speed.py --device cuda --only e --steps 22 --warmup 10 \
        --set train.max_tokens=16384
    python bench/multi30k.py --config configs/multi30k_gpu.yaml --directions de-en --minutes 10 \
        --average 5 --device-name "1 H100"

An epoch holds only 32 batches of 16,384 tokens, so train_speed.py --steps above 22 with
--warmup 10 adds nothing. Training runs stop on their own clock (--minutes); a machine that cuts
each command short can train in several `multi30k.py --resume` calls with `--score none` and
score in the last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _multi30k import QUICK_TRAINING, ROOT, add_data_options, multi30k_data, require_data

CUDA_TESTS = [
    "tests/transformer/test_cuda.py",
    "tests/transformer/test_cuda_packing.py",
    "tests/training/test_cuda_training.py",
    "tests/training/test_loss.py::test_the_compiled_softmax_computes_what_the_eager_one_does_on_cuda",
]
# (name, config file, overrides): the `tfm train` runs, steps cut short; the first line of each
# (allocations, compilation) is left out of the medians.
BASE_RUN = ("base_gpu", "configs/base_gpu.yaml", ["train.max_steps=200"])
COMPILED_RUN = (
    "multi30k_gpu compiled static",
    "configs/multi30k_gpu.yaml",
    ["train.max_steps=600", "train.compile=true", "train.static_shapes=true"],
)
SHORT_RUN = ["train.log_every=25", "train.checkpoint_every=null", "train.validate_every=100000"]
NO_GPU = "left out: torch finds no CUDA GPU here"


class Budget:
    def __init__(self, minutes: float) -> None:
        self.end = time.monotonic() + 60 * minutes

    def left_s(self) -> float:
        return self.end - time.monotonic()


def run_part(
    name: str, command: list[str], log: Path, budget: Budget, cap_s: float, needs_gpu: bool = False
) -> str:
    """Run `command` from the checkout's root with src/ importable, its output appended to `log`
    and echoed; 'ok', 'failed (exit N)', 'timed out' or 'left out' (no time left, or no GPU for a
    part that `needs_gpu`: said in `log`)."""
    limit = min(cap_s, budget.left_s())
    if needs_gpu and not cuda_present():
        outcome = NO_GPU
        with log.open("a", encoding="utf-8") as out:
            out.write(f"===== {name}: {outcome}\n")
    elif limit < 20:
        outcome = "left out: the budget is spent"
    else:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), "src") if p)
        start = time.monotonic()
        with log.open("a", encoding="utf-8") as out:
            out.write(f"\n===== {name}: {' '.join(command)}\n")
            out.flush()
            try:
                code = subprocess.run(
                    command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=limit
                ).returncode
                outcome = "ok" if code == 0 else f"failed (exit {code})"
            except subprocess.TimeoutExpired:
                outcome = f"timed out after {limit:.0f} s"
            out.write(f"===== {name}: {outcome} in {time.monotonic() - start:.0f} s\n")
    print(f"{name}: {outcome}", flush=True)
    return outcome


def train_command(config: str, overrides: list[str], run: Path, args) -> list[str]:
    if args.quick:
        config_args = ["--config", str(Path(args.out) / "toy.yaml")]
        kept = [o for o in overrides if not o.startswith("train.compile")]  # minutes on a CPU
        overrides = [*QUICK_TRAINING, "train.device=cpu", *kept, "train.max_steps=6"]
        overrides.append("train.log_every=2")  # after SHORT_RUN's
    else:
        config_args = ["--config", config]
        overrides = [*multi30k_data(require_data(args.data)), *overrides]
    sets = [x for o in [*SHORT_RUN, *overrides, f"run_dir={run}"] for x in ("--set", o)]
    return [sys.executable, "-m", "tfm", "train", *config_args, *sets, "--no-progress"]


def run_summary(metrics: Path) -> dict:
    """Medians over a run's training lines, the first (warm-up) left out."""
    if not metrics.exists():
        return {"missing": str(metrics)}
    events = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
    lines = [e for e in events if "step_ms" in e and not e.get("partial")][1:]
    summary: dict = {"log_lines": len(lines)}
    for key in ("step_ms", "tokens_per_s", "model_tflops_per_s", "mfu", "train_loss"):
        values = [e[key] for e in lines if key in e]
        if values:
            summary[f"median_{key}" if key != "train_loss" else "last_train_loss"] = (
                statistics.median(values) if key != "train_loss" else values[-1]
            )
    return summary


def goals(runs: dict, speed: dict) -> list[dict]:
    """The issue's goals with the figures measured for them (None: not measured)."""
    base = speed.get("base_model", {})
    recipe = speed.get("recipe", {})
    loss = base.get("validation_loss", {})
    fp32 = loss.get("fp32")
    best_bf16_mfu = max(
        (base.get(v, {}).get("mfu_datasheet", 0) for v in ("bf16", "bf16 packed")), default=0
    )
    return [
        {"goal": "base model bf16 >= 35% of the dense bf16 peak (gpu_speed, best layout)",
         "measured": best_bf16_mfu or None, "target": 0.35},
        {"goal": "base model bf16 in tfm train (configs/base_gpu.yaml): mfu",
         "measured": runs.get("base_gpu", {}).get("median_mfu"), "target": 0.35},
        {"goal": "base bf16 validation loss within 1% of float32's",
         "measured": {v: (x - fp32) / fp32 for v, x in loss.items() if fp32 and v != "fp32"},
         "target": 0.01},
        {"goal": "7.6M model median step <= 8 ms in tfm train",
         "measured": runs.get(COMPILED_RUN[0], {}).get("median_step_ms"), "target": 8},
        {"goal": "de→en recipe training steps <= 45 s", "measured": recipe.get("training_s"),
         "target": 45},
        {"goal": "test2016 BLEU (beam 5) within 0.5 of 39.76",
         "measured": recipe.get("beam 5", {}).get("bleu"), "target": 39.76},
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_options(parser)
    parser.add_argument("--out", type=Path, default=os.environ.get("OUT"), help="default: $OUT")
    parser.add_argument("--budget-minutes", type=float, default=8.0)
    args = parser.parse_args(argv)
    if args.out is None:
        parser.error("give --out DIR (or set OUT)")
    args.out.mkdir(parents=True, exist_ok=True)
    budget, out, python = Budget(args.budget_minutes), args.out, sys.executable
    data = ["--quick"] if args.quick else ["--data", str(require_data(args.data))]
    outcomes = {}
    outcomes["cuda tests"] = run_part(
        "cuda tests",
        [python, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *CUDA_TESTS],
        out / "cuda_tests.txt",
        budget,
        150,
        needs_gpu=True,
    )  # each would skip: a pytest process only to say so is seconds for nothing
    kernels = [python, "bench/gpu_kernels.py", *data, "--json", str(out / "gpu_kernels.json")]
    outcomes["gpu kernels"] = run_part("gpu kernels", kernels, out / "gpu_kernels.txt", budget, 90)
    speed = [python, "bench/gpu_speed.py", *data, "--steps", "24", "--base-steps", "12"]
    minutes = f"{min(2.0, budget.left_s() / 60 - 0.3):.2f}"
    outcomes["gpu speed"] = run_part(
        "gpu speed", [*speed, "--warmup", "3", "--json", str(out / "gpu_speed.json"), "--only",
                      "small", *(["--variants", "fp32 packed"] if args.quick else ["base"]),
                      "--budget-minutes", minutes],
        out / "gpu_speed.txt", budget, 150,
    )  # fmt: skip
    runs: dict = {}
    with tempfile.TemporaryDirectory(prefix="tfm-gpu-round-") as tmp:
        if args.quick:
            (out / "toy.yaml").write_text("{}\n", encoding="utf-8")
        train_run(BASE_RUN, Path(tmp), args, budget, outcomes, runs, cap_s=90)
        if not args.quick:  # the recipe, its clock cut to what the budget leaves
            left = f"{min(3.0, budget.left_s() / 60 - 0.3):.2f}"
            recipe = [python, "bench/gpu_speed.py", *data, "--only", "c", "--budget-minutes",
                      left, "--json", str(out / "gpu_speed_c.json")]  # fmt: skip
            outcomes["recipe"] = run_part("recipe", recipe, out / "gpu_speed.txt", budget, 200)
            train_run(COMPILED_RUN, Path(tmp), args, budget, outcomes, runs, cap_s=240)
        else:
            (out / "toy.yaml").unlink()
    figures = _read_json(out / "gpu_speed.json")
    figures.update(_read_json(out / "gpu_speed_c.json"))
    (out / "gpu_speed_c.json").unlink(missing_ok=True)
    (out / "gpu_speed.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    summary = {"outcomes": outcomes, "tfm_train_runs": runs, "goals": goals(runs, figures)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary["goals"], indent=1))


def train_run(entry, tmp: Path, args, budget: Budget, outcomes: dict, runs: dict, cap_s: float):
    """One `tfm train` run (BASE_RUN, COMPILED_RUN): its outcome, and the summary of its
    metrics (what it logged, also when it ran out of time)."""
    name, config, overrides = entry
    run = tmp / name.replace(" ", "-")
    command = train_command(config, overrides, run, args)
    outcomes[name] = run_part(name, command, args.out / "train_runs.txt", budget, cap_s)
    runs[name] = run_summary(run / "metrics.jsonl")
    print(f"  {json.dumps(runs[name])}", flush=True)


def cuda_present() -> bool:
    import torch  # here, not at the top: the parts are processes of their own

    return torch.cuda.is_available()


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


if __name__ == "__main__":
    main()

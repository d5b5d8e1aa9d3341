"""Every GPU figure of tfm in one command, in under 8 minutes on one H100 or H200:

    (a) the device's float32 and bf16 matrix-product rates (8192 x 8192), measured in this run
    (b) training steps of the Multi30k model (d_model 256, 3 + 3 layers, 4,096-token batches) and
        of the paper's base model (d_model 512, 6 + 6 layers, 32k joint vocabulary, 25k-token
        batches): float32 and bf16 autocast, padded and packed (`train.layout`), and bf16 with
        static shapes (`train.static_shapes`), alternating step by step over the same batches
        from the same initial weights. Per variant: median step time, real target tokens per
        second, model TFLOP/s (of what each layout computes) and MFU (over the datasheet peak of
        the variant's precision, `tfm.training.utilisation.PEAKS`, and over the rate measured in
        (a)), and its speed against float32 (the median of step-by-step ratios). For both
        models also the validation loss after the same steps, bf16 (padded and packed) against
        float32.
    (c) the de→en recipe (configs/multi30k_gpu.yaml) trained to its end (`tfm.training.train`):
        its steps, wall time, and its steps' own time (the `step_ms` of its log lines, and at
        (b)'s median step); then test2016 decoded greedy and with beam 5 (`tfm eval`'s
        `evaluate_run`): BLEU and sentences per second
    (d) the Multi30k model's bf16 steps with static shapes under train.compile (on CUDA,
        "reduce-overhead": CUDA graphs), on batches of the two commonest static shapes, against
        the same steps uncompiled; left out when less than --compile-minutes remain

    python bench/gpu_speed.py --data DIR --json figures.json   # on a CUDA GPU
    python bench/gpu_speed.py --data DIR --only base           # one part: small, base, c or d
    python bench/gpu_speed.py --quick                          # CPU, seconds (tests)

A part that fails (for instance a compiler or CUDA-graph error in (d)) prints its error and the
script goes on with the next. Each part is skipped, saying so, when the time budget
(--budget-minutes, default 7.5) would run out before it ends. --quick runs every part but (d) with
tiny models on the built-in toy corpus, on the CPU, in float32 and bf16.

Goals, each a ratio or share within one run: the base model in bf16 at >= 35% of the dense bf16
peak with its validation loss within 1% of float32's; the small model's median step <= 8 ms in
`tfm train` itself; the recipe's training steps <= 45 s with test2016 BLEU within 0.5 of 39.76.

Model FLOPs (`tfm.training.utilisation`) are those of the matrix products, counted from the
model's shape and each batch's padded shape as `torch.utils.flop_counter` counts them (the tests
check they are equal): 3 x the forward's, the output projection over real target tokens only; a
packed batch (`train.layout: packed`) counts only its real tokens and each sentence's own
attention scores. Training logs them too: the start log gives the FLOPs per target token and the
peak MFU is measured against, and each metrics.jsonl line `step_ms` (its steps' mean),
`model_tflops_per_s` and, on a GPU of the table, `mfu`. The table's dense peaks (TFLOP/s, bf16 /
float32 without TF32) from NVIDIA's datasheets: H100 SXM 989.4 / 66.9, H100 PCIe 756 / 51.2,
H100 NVL 835 / 60, H200 989.4 / 66.9, A100 312 / 19.5, L4 121 / 30.3.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import json
import logging
import os
import statistics
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
from _multi30k import (
    MODEL,
    QUICK,
    QUICK_TRAINING,
    ROOT,
    add_data_options,
    machine,
    multi30k_data,
    require_data,
    summary,
    training_session,
)
from train_speed import first_batches, matmul_tflops, twin

from tfm.api import (
    Batch,
    DecodeRequest,
    DecodeSettings,
    device_peak,
    load_config,
    optimizer_step,
    static_shape,
    teacher_forced_loss,
    train,
)
from tfm.api import model_step_flops as step_flops

log = logging.getLogger("bench.gpu_speed")

BASE = [
    "model.d_model=512",
    "model.n_heads=8",
    "model.n_encoder_layers=6",
    "model.n_decoder_layers=6",
    "model.d_ff=2048",
    "tokenizer.vocab_size=32000",
    "train.max_tokens=25000",
]
QUICK_BASE = [*QUICK, "model.d_model=64", "model.d_ff=128", "train.max_tokens=1200"]
# A short warm-up to a moderate peak, so that a few dozen steps move the validation loss.
SCHEDULE = ["train.warmup_steps=100", "train.lr=0.001"]
VARIANTS = {  # name: (dtype, train.layout, static shapes)
    "fp32": (torch.float32, "padded", False),
    "fp32 packed": (torch.float32, "packed", False),
    "bf16": (torch.bfloat16, "padded", False),
    "bf16 packed": (torch.bfloat16, "packed", False),
    "bf16 static": (torch.bfloat16, "padded", True),
}


class Clock:
    """The time budget of the whole run."""

    def __init__(self, minutes: float) -> None:
        self.end = time.monotonic() + 60 * minutes

    def left_s(self) -> float:
        return self.end - time.monotonic()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_step(pair, batch: Batch) -> float:
    """Seconds of one training step, the device's queue emptied before and after."""
    device = pair[0].device
    synchronize(device)
    start = time.perf_counter()
    optimizer_step(*pair, [batch])
    synchronize(device)
    return time.perf_counter() - start


def matmul_peaks(device: torch.device, args) -> dict[str, float]:
    """(a): TFLOP/s of a square product, the best of three bursts, per precision."""
    size = 256 if args.quick else (8192 if device.type == "cuda" else 2048)
    peaks = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        peaks[name] = max(matmul_tflops(device, dtype, size=size, repeats=4) for _ in range(3))
    print(f"(a) measured matmul peak ({size}x{size}): fp32 {peaks['fp32']:.2f} TFLOP/s, "
          f"bf16 {peaks['bf16']:.2f} TFLOP/s")  # fmt: skip
    return peaks


def training_steps(name: str, args, overrides: list[str], peaks: dict[str, float]) -> dict:
    """(b) for one model: the variants asked for, alternating over the same batches."""
    figures: dict = {}
    with training_session(args, overrides) as (session, _):
        initial = copy.deepcopy(session.model.state_dict())
        pairs = {
            v: twin(session, initial, dtype, layout=layout, static_shapes=static)
            for v, (dtype, layout, static) in VARIANTS.items()
            if v in args.variants
        }
        batches = first_batches(session, args.warmup + args.steps)
        timed = batches[args.warmup :]
        tokens = sum(b.n_tgt_tokens for b in timed)
        flops = {  # what each layout computes: a packed step no padding
            layout: [step_flops(session.model_args, [b], packed=layout == "packed") for b in timed]
            for layout in ("padded", "packed")
        }
        seconds: dict[str, list[float]] = collections.defaultdict(list)
        for k, batch in enumerate(batches):
            for v in list(pairs)[:: 1 if k % 2 == 0 else -1]:
                spent = timed_step(pairs[v], batch)
                if k >= args.warmup:
                    seconds[v].append(spent)
        peak = device_peak(session.device)
        parameters = sum(p.numel() for p in session.model.parameters())
        print(f"(b) {name} model, {parameters / 1e6:.1f}M parameters, on {session.device.type}: "
              f"{len(timed)} timed steps after {args.warmup}, {tokens / len(timed):.0f} real "
              f"target tokens and {sum(flops['padded']) / len(timed) / 1e12:.3f} model TFLOP a "
              f"step ({sum(flops['packed']) / len(timed) / 1e12:.3f} packed); datasheet peak: "
              f"{peak.name if peak else 'unknown'}")  # fmt: skip
        for v, (dtype, layout, _) in VARIANTS.items():
            if v not in pairs:
                continue
            times = seconds[v]
            precision = "bf16" if dtype == torch.bfloat16 else "fp32"
            rate = sum(flops[layout]) / sum(times) / 1e12
            ratios = [b / t for b, t in zip(seconds["fp32"], times, strict=True)]
            row = {
                "median_step_ms": 1e3 * statistics.median(times),
                "tokens_per_s": tokens / sum(times),
                "model_tflops_per_s": rate,
                "mfu_measured_peak": rate / peaks[precision],
                "speed_against_fp32": statistics.median(ratios),
            }
            datasheet = ""
            if peak is not None:
                row["mfu_datasheet"] = rate / peak.tflops(dtype)
                datasheet = f", MFU {100 * row['mfu_datasheet']:.1f}% of the datasheet {precision}"
            print(f"  {v:>11}: median {row['median_step_ms']:7.1f} ms, "
                  f"{row['tokens_per_s']:9.0f} tokens/s, {rate:8.3f} TFLOP/s{datasheet}, "
                  f"{100 * row['mfu_measured_peak']:.1f}% of the measured {precision} peak; "
                  f"speed against fp32 {summary(ratios)}")  # fmt: skip
            figures[v] = row
        settings = DecodeSettings.from_config(session.config.decoding, session.device, "float32")
        val = session.validation_split
        losses = {
            v: teacher_forced_loss(pairs[v][0].model, val, settings)
            for v in ("fp32", "bf16", "bf16 packed", "fp32 packed")
            if v in pairs
        }
        fp32 = losses["fp32"]
        against = ", ".join(
            f"{v} {loss:.4f} ({100 * (loss - fp32) / fp32:+.2f}%)"
            for v, loss in losses.items()
            if v != "fp32"
        )
        print(f"  validation loss after {len(batches)} steps (scored in fp32): fp32 {fp32:.4f}, "
              f"{against}")  # fmt: skip
        figures["validation_loss"] = losses
    return figures


def recipe(args, runs: Path, small: dict, clock: Clock) -> dict:
    """(c): the de→en recipe trained to its end, then test2016 decoded greedy and with beam 5.
    Its training clock (train.max_minutes) is cut to what the budget leaves, less a minute for
    decoding, and says so when it stops training before the recipe's end."""
    from tfm.api import evaluate_run, open_translator

    run = runs / "recipe"
    if args.quick:
        config = load_config(None, [*QUICK_TRAINING, "train.device=cpu", f"run_dir={run}"])
    else:
        data = multi30k_data(require_data(args.data), "de", "en")
        config = load_config(ROOT / "configs" / "multi30k_gpu.yaml", [*data, f"run_dir={run}"])
        left = max(clock.left_s() - 60, 30) / 60
        config.train.max_minutes = min(config.train.max_minutes or left, left)
    start = time.perf_counter()
    with contextlib.chdir(runs):  # not remembered as the user's last run
        result = train(config, progress_bar=False)
    wall = time.perf_counter() - start
    step_ms = small.get("fp32", {}).get("median_step_ms", float("nan"))
    figures = {
        "steps": result.steps,
        "wall_s": wall,
        "steps_s": result.steps * step_ms / 1e3,
        "training_s": training_seconds(run / "metrics.jsonl"),
    }
    print(f"(c) the de→en recipe ({'toy' if args.quick else 'configs/multi30k_gpu.yaml'}): "
          f"{result.steps} steps ({result.stopped_because}) in {wall:.1f} s of wall time, "
          f"validation included; its steps took {figures['training_s']:.1f} s by its log "
          f"({figures['steps_s']:.1f} s at (b)'s median {step_ms:.1f} ms)")  # fmt: skip
    for name, search in (("greedy", {"strategy": "greedy"}), ("beam 5", {"beam_size": 5})):
        with contextlib.chdir(runs):
            scores, _ = evaluate_run(open_translator(DecodeRequest(run=run, search=search)))
        figures[name] = {
            "bleu": scores["bleu"],
            "bleu_lowercase": scores["bleu_lowercase"],
            "sentences_per_second": scores["sentences_per_second"],
        }
        print(f"  test {name}: BLEU {scores['bleu']:.2f} (lowercased "
              f"{scores['bleu_lowercase']:.2f}), {scores['sentences_per_second']:.0f} "
              "sentences/s")  # fmt: skip
    return figures


def training_seconds(metrics: Path) -> float:
    """The training time a run's log lines count (validation and checkpoints left out): each
    line's mean step time `step_ms` times the steps since the line before."""
    seconds, last_step = 0.0, 0
    for line in metrics.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if "step_ms" in event:
            seconds += event["step_ms"] / 1e3 * (event["step"] - last_step)
            last_step = event["step"]
    return seconds


def compiled_static(args) -> dict:
    """(d): bf16 static-shape steps of the Multi30k model, compiled and not, over the batches of
    the two commonest static shapes among the first epoch's (so that two compilations serve)."""
    overrides = [*MODEL, *SCHEDULE, f"train.device={args.device}", *args.set]
    with training_session(args, overrides) as (session, _):
        initial = copy.deepcopy(session.model.state_dict())
        data = session.epochs.data(1)
        batches = [data.batch(indices) for indices in data.batches[: 8 * args.steps]]
        max_tokens = session.config.train.max_tokens

        def shape(b: Batch) -> tuple[int, int]:
            return static_shape(*b.src.shape, b.tgt_in.size(1), max_tokens=max_tokens)

        common = {s for s, _ in collections.Counter(map(shape, batches)).most_common(2)}
        chosen = [b for b in batches if shape(b) in common][: args.warmup + args.steps]
        pairs = {
            "bf16 static": twin(session, initial, torch.bfloat16, static_shapes=True),
            "bf16 static compiled": twin(
                session, initial, torch.bfloat16, static_shapes=True, compile=True
            ),
        }
        seconds: dict[str, list[float]] = collections.defaultdict(list)
        for k, batch in enumerate(chosen):
            for name, pair in pairs.items():
                spent = timed_step(pair, batch)
                if k >= args.warmup:
                    seconds[name].append(spent)
    tokens = sum(b.n_tgt_tokens for b in chosen[args.warmup :])
    base = seconds["bf16 static"]
    print(f"(d) Multi30k model, bf16, static shapes {sorted(common)}, {len(base)} timed steps "
          f"after {args.warmup} (compilation):")  # fmt: skip
    figures = {}
    for name in pairs:
        times = seconds[name]
        ratios = [b / t for b, t in zip(base, times, strict=True)]
        figures[name] = {"median_step_ms": 1e3 * statistics.median(times)}
        print(f"  {name:>20}: median {1e3 * statistics.median(times):6.1f} ms, "
              f"{tokens / sum(times):9.0f} tokens/s; speed against uncompiled "
              f"{summary(ratios)}")  # fmt: skip
    return figures


def part(name: str, clock: Clock, needs_s: float, run: Callable[[], dict]) -> dict:
    """Run one part unless the budget is too short for it; report its error and go on."""
    if clock.left_s() < needs_s:
        print(
            f"({name}) left out: {clock.left_s():.0f} s of the budget left, it needs ~{needs_s:.0f}"
        )
        return {"skipped": "time budget"}
    try:
        return run()
    except Exception as error:  # noqa: BLE001 - report and go on with the other parts
        log.debug("%s", traceback.format_exc())
        print(f"({name}) failed: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
        return {"failed": f"{type(error).__name__}: {error}"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_options(parser)
    parser.add_argument("--steps", type=int, default=40, help="timed steps per variant in (b)")
    parser.add_argument("--base-steps", type=int, default=20, help="the same, for the base model")
    parser.add_argument("--warmup", type=int, default=5, help="untimed first steps")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS),
                        help="the variants of (b), fp32 always among them")  # fmt: skip
    parser.add_argument("--budget-minutes", type=float, default=7.5)
    parser.add_argument("--compile-minutes", type=float, default=2.0, help="what (d) may take")
    parser.add_argument("--device", default="cuda", help="cuda, or cpu (--quick: cpu)")
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file too")
    parser.add_argument("--set", action="append", default=[], help="extra config overrides")
    parser.add_argument("--only", choices=["small", "base", "c", "d"], nargs="*",
                        help="these parts only (b: small, base); (a) always runs")  # fmt: skip
    args = parser.parse_args(argv)
    args.variants = ["fp32", *(v for v in args.variants if v != "fp32")]  # what (b) divides by
    if args.quick:
        args.steps, args.base_steps, args.warmup, args.device = 4, 3, 1, "cpu"
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    clock = Clock(args.budget_minutes)
    device = torch.device(args.device)
    print(machine())
    figures: dict = {"machine": machine()}
    figures["matmul_peak_tflops"] = peaks = matmul_peaks(device, args)
    on = [f"train.device={args.device}", *SCHEDULE]
    small, base = (QUICK, QUICK_BASE) if args.quick else (MODEL, [*MODEL, *BASE])
    parts = set(args.only or ["small", "base", "c", "d"])
    small, base = [*small, *on, *args.set], [*base, *on, *args.set]
    base_args = argparse.Namespace(**{**vars(args), "steps": args.base_steps})
    if "small" in parts:
        figures["multi30k_model"] = part(
            "b", clock, 20, lambda: training_steps("Multi30k", args, small, peaks)
        )
    if "base" in parts:
        figures["base_model"] = part(
            "b", clock, 60, lambda: training_steps("base", base_args, base, peaks)
        )
    if "c" in parts:
        with tempfile.TemporaryDirectory(prefix="tfm-gpu-speed-") as runs:
            small_steps = figures.get("multi30k_model", {})
            figures["recipe"] = part(
                "c", clock, 30 if args.quick else 150,
                lambda: recipe(args, Path(runs), small_steps, clock),
            )  # fmt: skip
    if "d" in parts and not args.quick:
        needs = 60 * args.compile_minutes
        figures["compiled"] = part("d", clock, needs, lambda: compiled_static(args))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"{clock.left_s():.0f} s of the budget left")  # fmt: skip


if __name__ == "__main__":
    main()

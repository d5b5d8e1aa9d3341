"""Which kernels a training step runs, and the fused loss against the plain one, on one GPU:

    (a) attention: for each `train.layout` (padded, packed) and precision (fp32, bf16 autocast),
        one training step of the Multi30k model under torch.profiler: the attention operations
        and kernels it ran with their time, and whether the step runs at all with only PyTorch's
        flash kernel allowed (`sdpa_kernel(FLASH_ATTENTION)`): the proof that every attention
        of the step is on flash. A packed bf16 step should run so; a padded one cannot (its
        masks need the memory-efficient kernel).
    (b) the loss of the base model's step (25k real target tokens, d_model 512, 32k vocabulary)
        in bf16 autocast, forward and backward: `projected_loss_sum` with its softmax compiled
        and eager, against the output projection and `F.cross_entropy` on the whole logits,
        interleaved: median milliseconds, the speed of each against the whole logits, and the
        memory each takes beyond its inputs

    python bench/gpu_kernels.py --data DIR --json kernels.json   # on a CUDA GPU
    python bench/gpu_kernels.py --quick                          # CPU, seconds

--quick runs both parts on the CPU with tiny sizes, (b) without the compiled softmax (a CPU
compilation takes tens of seconds).
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _multi30k import MODEL, QUICK, add_data_options, machine, summary, training_session
from gpu_speed import synchronize
from torch.nn.attention import SDPBackend, sdpa_kernel
from train_speed import first_batches, twin

from tfm.api import optimizer_step, projected_loss_sum

# Names of the profiler's attention events, on the CPU and on CUDA (flash, memory-efficient
# "fmha"/"cutlass" kernels and the operations that launch them).
ATTENTION = ("attention", "flash", "fmha", "efficient", "sdpa")


def attention_events(pair, batch) -> dict[str, float]:
    """The attention operations and kernels of one step, name -> total milliseconds (device
    time on a GPU, CPU time elsewhere)."""
    device = pair[0].device
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        optimizer_step(*pair, [batch])
        synchronize(device)
    found = {}
    for event in prof.key_averages():
        if any(word in event.key.lower() for word in ATTENTION):
            spent = getattr(event, "device_time_total", 0) if device.type == "cuda" else 0
            found[event.key] = round((spent or event.cpu_time_total) / 1e3, 3)
    return found


def flash_only(pair, batch) -> str:
    """'runs' when the step runs with the flash kernel alone allowed, else the error."""
    try:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            optimizer_step(*pair, [batch])
            synchronize(pair[0].device)
    except RuntimeError as error:
        return f"fails: {str(error).splitlines()[0][:160]}"
    return "runs"


def attention_kernels(args) -> dict:
    """(a)."""
    overrides = [*(QUICK if args.quick else MODEL), f"train.device={args.device}"]
    figures = {}
    with training_session(args, overrides) as (session, _):
        initial = copy.deepcopy(session.model.state_dict())
        batch = first_batches(session, 1)[0]
        print(f"(a) attention of one training step, batch {tuple(batch.src.shape)} sources, "
              f"{tuple(batch.tgt_in.shape)} targets, on {session.device.type}")  # fmt: skip
        for layout in ("padded", "packed"):
            for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
                pair = twin(session, initial, dtype, layout=layout)
                optimizer_step(*pair, [batch])  # warm: allocations, kernel choices
                events = attention_events(pair, batch)
                row = {"events_ms": events, "flash_only": flash_only(pair, batch)}
                figures[f"{name} {layout}"] = row
                listed = "; ".join(f"{k} {v:.2f} ms" for k, v in sorted(events.items()))
                print(f"  {name} {layout}: flash alone: {row['flash_only']}\n    {listed}")
    return figures


def loss_inputs(device: torch.device, quick: bool):
    n, d, vocab = (300, 32, 200) if quick else (25_000, 512, 32_000)
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(n, d, generator=generator).to(device).requires_grad_()
    weight = (torch.randn(vocab, d, generator=generator) / d**0.5).to(device).requires_grad_()
    targets = torch.randint(0, vocab, (n,), generator=generator).to(device)
    return hidden, weight, targets


def whole_logits(hidden, weight, targets):
    logits = F.linear(hidden, weight)  # (N, V)
    return F.cross_entropy(logits.float(), targets, label_smoothing=0.1, reduction="sum")


def fused(compiled: bool):
    def loss(hidden, weight, targets):
        return projected_loss_sum(hidden, weight, targets, label_smoothing=0.1, compiled=compiled)

    return loss


def timed_loss(loss_fn, inputs, device) -> tuple[float, float]:
    """Seconds of one forward and backward under bf16 autocast, and the MiB it took beyond
    what was allocated before (CUDA only; 0 elsewhere)."""
    hidden, weight, _ = inputs
    hidden.grad = weight.grad = None
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
    start = time.perf_counter()
    with torch.autocast(device.type, dtype=torch.bfloat16):
        total = loss_fn(*inputs)
    total.backward()
    synchronize(device)
    seconds = time.perf_counter() - start
    extra = 0.0
    if device.type == "cuda":
        extra = (torch.cuda.max_memory_allocated(device) - before) / 2**20
    return seconds, extra


def loss_kernels(args) -> dict:
    """(b)."""
    device = torch.device(args.device)
    inputs = loss_inputs(device, args.quick)
    variants = {"whole logits": whole_logits, "fused, eager softmax": fused(False)}
    if not args.quick:
        variants["fused, compiled softmax"] = fused(True)
    seconds, memory = collections.defaultdict(list), {}
    for k in range(args.warmup + args.steps):
        for name in list(variants)[:: 1 if k % 2 == 0 else -1]:
            spent, extra = timed_loss(variants[name], inputs, device)
            if k >= args.warmup:
                seconds[name].append(spent)
                memory[name] = extra
    n, vocab = inputs[0].size(0), inputs[1].size(0)
    print(f"(b) the loss of {n} tokens over {vocab} words, bf16, forward and backward, "
          f"{args.steps} times each after {args.warmup}:")  # fmt: skip
    figures = {}
    base = seconds["whole logits"]
    for name, times in seconds.items():
        ratios = [b / t for b, t in zip(base, times, strict=True)]
        figures[name] = {
            "median_ms": 1e3 * statistics.median(times),
            "extra_mib": memory[name],
            "speed_against_whole_logits": statistics.median(ratios),
        }
        print(f"  {name:>24}: median {figures[name]['median_ms']:8.2f} ms, "
              f"{memory[name]:8.0f} MiB beyond the inputs; speed against the whole logits "
              f"{summary(ratios)}")  # fmt: skip
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_options(parser)
    parser.add_argument("--device", default="cuda", help="cuda, or cpu (--quick: cpu)")
    parser.add_argument("--steps", type=int, default=10, help="timed repeats per loss in (b)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first repeats in (b)")
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file too")
    args = parser.parse_args(argv)
    if args.quick:
        args.device, args.steps, args.warmup = "cpu", 3, 1
    print(machine())
    figures = {"machine": machine(), "attention": attention_kernels(args)}
    figures["loss"] = loss_kernels(args)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

r"""Training speed on Multi30k de-en with the 7.6M model (d_model 256, 3 + 3 layers), measured
through tfm's own training step (`tfm.training.optimizer_step` on a real `Session`, set up as
`tfm train` sets it up), each part selectable with --only:

    (a) the share of step time outside forward, loss, backward, clipping and the AdamW step
        (collate, to(device), Python), goal < 5%
    (b) the share of real tokens in one epoch's padded training batches (`train.max_tokens`
        4,096), goal >= 90%
    (c) RSS at each epoch end over --epochs (3) epochs of a --subset (1,500 pairs): no growth,
        and the peak
    (d) bf16 autocast against float32: steps per second, interleaved step by step on the same
        batches from the same initial weights, and the validation loss of both after the same
        steps, scored in float32 (goal >= 2x, validation loss within 2%)
    (e) only when asked (--only e), for a GPU: float32, bf16 autocast and bf16 autocast with
        train.compile, interleaved step by step on the same batches from the same initial
        weights: real target tokens per second, the speed of each against float32, and the
        share of the device's dense bf16 peak reached (FLOPs of a step counted by
        torch.utils.flop_counter; peak from --peak-tflops or the GPU's name: H100 SXM and H200
        989, H100 PCIe 756, A100 312 TFLOP/s)
    (f) model FLOPs utilisation: the model FLOP/s of float32 training steps (FLOPs from the
        model's shape and each batch's, tfm.training.utilisation, the figure training logs)
        against this machine's matrix-product rate, measured after each step in the same run
        (a float32 --matmul-size square product, 2048 x 2048, on the threads the steps use and
        on one thread), and against the datasheet peak on a GPU that tfm's table knows
    profile: the top costs of one profiled step (torch.profiler).

    python bench/train_speed.py            # a few minutes on 2 CPU cores
    python bench/train_speed.py --short    # fewer steps and pairs of each part
    python bench/train_speed.py --quick    # a tiny toy model, seconds (tests)
    OMP_NUM_THREADS=2 python bench/train_speed.py --only f --steps 20 --warmup 2
    python bench/train_speed.py --only d --steps 100
    python bench/train_speed.py --device cuda --only e --steps 60 --warmup 10 \
        --set train.max_tokens=16384                                  # one GPU

(a) times each piece of the real step by wrapping it (model forward hooks, the loss function,
backward, clip_grad_norm_, optimizer.step, Batch.to) for this process only, and collation (which
the loop does before the step) beside it; the rest of the step's wall time is the overhead. The
learning rate is warmed up over 100 steps to a peak of 1e-3 (`train.warmup_steps=100`,
`train.lr=0.001`) so that a short run moves the validation loss.

(e) with 16,384-token batches (`--set train.max_tokens=16384`): an epoch of Multi30k holds only
32 of them, so --steps above 22 with --warmup 10 adds nothing.

(f) pairs each step with a matrix product measured right after it, so the ratio holds on a
loaded machine even when both rates fall (under a load average of 14-18 on two cores both were
about 1/14 of a quiet machine's). Under such load one thread multiplies no faster than two, and
the one-thread share means nothing.

(d) on a CPU: without AMX, bf16 matrix products gain too little, since they are only part of a
step and the backward, the float32 loss over 8,000-way logits and the elementwise work gain
nothing. With AMX, PyTorch's fused CPU attention runs its backward far slower in bf16 than in
float32, so tfm runs attention in float32 under bf16 training on a CPU. oneDNN builds and caches
a kernel for every new matrix shape, and batches come in a new shape almost every step: short
runs over few batches flatter bf16, and a long bf16 run grows in memory
(`ONEDNN_PRIMITIVE_CACHE_CAPACITY=16` caps the memory but makes every shape new again). So
`train.precision: auto` is float32 on a CPU; `train.static_shapes` (batches padded to a few fixed
shapes) is the way to fewer batch shapes.
"""

import argparse
import contextlib
import copy
import dataclasses
import logging
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator

import torch
from _multi30k import add_data_options, machine, rss_mib, summary, training_session

from tfm.api import (
    DataParallel,
    DecodeSettings,
    EpochData,
    Progress,
    Replicas,
    Session,
    StopFlag,
    UnreadSteps,
    batch_layout,
    batching,
    build_optimizer,
    device_peak,
    model_step_flops,
    optimizer_step,
    padding_share,
    teacher_forced_loss,
)

log = logging.getLogger("bench.train_speed")
COMPUTE = ("forward", "loss", "backward", "clip", "optimizer")


@contextlib.contextmanager
def stopwatches(session: Session, parallel: DataParallel) -> Iterator[dict[str, float]]:
    """Seconds spent in each piece of the training step, accumulated while inside the block."""
    spent: dict[str, float] = defaultdict(float)

    def timing(name, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - start

        return wrapper

    started: list[float] = []

    def forward_done(*_) -> None:
        spent["forward"] += time.perf_counter() - started.pop()

    hooks = [
        session.model.register_forward_pre_hook(lambda *_: started.append(time.perf_counter())),
        session.model.register_forward_hook(forward_done),
    ]
    patches = [
        (batch_layout, "projected_loss_sum", timing("loss", batch_layout.projected_loss_sum)),
        (batching.Batch, "to", timing("to(device)", batching.Batch.to)),
        (torch.nn.utils, "clip_grad_norm_", timing("clip", torch.nn.utils.clip_grad_norm_)),
        (parallel, "backward", timing("backward", parallel.backward)),
        (session.optimizer, "step", timing("optimizer", session.optimizer.step)),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    for obj, name, fn in patches:
        setattr(obj, name, fn)
    try:
        yield spent
    finally:
        for obj, name, fn in saved:
            setattr(obj, name, fn)
        del session.optimizer.step, parallel.backward  # instance attributes: back to the class's
        for hook in hooks:
            hook.remove()


def overhead_and_memory(session: Session, parallel: DataParallel, args) -> None:
    """(a) and (c): epochs over the first `args.subset` training pairs."""
    split = session.train_split
    n = min(args.subset, len(split))
    sampler = batching.TokenBatchSampler(
        [len(s) for s in split.src[:n]], [len(t) for t in split.tgt[:n]],
        max_tokens=session.config.train.max_tokens, seed=0,
    )  # fmt: skip
    print(f"(a, c) {args.epochs} epochs over {n} training pairs, {len(sampler)} steps an epoch")
    print(f"  before training: RSS {rss_mib()[0]:.0f} MiB")
    shares, totals = [], defaultdict(float)
    for epoch in range(args.epochs):
        data = EpochData(src=split.src[:n], tgt=split.tgt[:n], batches=sampler.epoch(epoch))
        for k, indices in enumerate(data.batches):
            with stopwatches(session, parallel) as spent:
                start = time.perf_counter()
                batch = data.batch(indices)
                spent["collate"] += time.perf_counter() - start
                optimizer_step(session, parallel, [batch])
                spent["step"] = time.perf_counter() - start
            if epoch == 0 and k == 0:
                continue  # the first step allocates and warms up
            shares.append(1 - sum(spent[c] for c in COMPUTE) / spent["step"])
            for name, seconds in spent.items():
                totals[name] += seconds
        current, peak = rss_mib()
        print(f"  epoch {epoch + 1} end: RSS {current:.0f} MiB, peak {peak:.0f} MiB")
    step = totals.pop("step")
    parts = ", ".join(f"{name} {100 * s / step:.1f}%" for name, s in totals.items())
    print(f"  step time: {parts}")
    mean = 1 - sum(totals[c] for c in COMPUTE) / step
    median = statistics.median(shares)
    print(f"  outside forward/loss/backward/clip/optimizer: median {100 * median:.2f}% of a "
          f"step (mean {100 * mean:.2f}%), goal < 5%")  # fmt: skip


def padding(session: Session) -> None:
    """(b): real tokens among the padded src and tgt tensors of one epoch's batches."""
    data = session.epochs.data(0)
    src, tgt = [len(s) for s in data.src], [len(t) for t in data.tgt]
    batches = data.batches
    share = padding_share(src, tgt, batches)
    print(f"(b) real tokens in training batches: {100 * share:.1f}% over {len(batches)} batches "
          f"at max_tokens={session.config.train.max_tokens}, goal >= 90%")  # fmt: skip


def profile_step(session: Session, parallel: DataParallel, rows: int) -> None:
    """The top costs of one float32 training step by self CPU time."""
    data = session.epochs.data(0)
    batch = data.batch(data.batches[0])
    optimizer_step(session, parallel, [batch])  # warm
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        optimizer_step(session, parallel, [batch])
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)
    print("profile of one step (self CPU time):\n" + table)


def first_batches(session: Session, n: int) -> list[batching.Batch]:
    """The first `n` batches of epoch 1 (fewer when the epoch has fewer), collated."""
    data = session.epochs.data(1)
    return [data.batch(indices) for indices in data.batches[:n]]


def twin(
    session: Session,
    initial: dict,
    dtype: torch.dtype,
    *,
    compile: bool = False,
    static_shapes: bool = False,
    layout: str = "padded",
) -> tuple[Session, DataParallel]:
    """A fresh copy of the session's model and optimizer from `initial` weights, in `dtype`,
    its training steps compiled when `compile`, its batches padded to static shapes when
    `static_shapes`, given to the model in `layout` (`train.layout`)."""
    model = copy.deepcopy(session.model)
    model.load_state_dict(initial)
    config = session.config.model_copy(deep=True)
    config.train.compile = compile
    config.train.static_shapes = static_shapes
    config.train.layout = layout
    copy_ = dataclasses.replace(
        session, config=config, model=model, optimizer=build_optimizer(model, config),
        dtype=dtype, progress=Progress(), unread=UnreadSteps(),
    )  # fmt: skip
    return copy_, DataParallel(Replicas(), copy_, StopFlag())


def bf16_against_fp32(session: Session, initial: dict, args) -> None:
    """(d): the two precisions alternate step by step over the same batches."""
    twins = {dtype: twin(session, initial, dtype) for dtype in (torch.float32, torch.bfloat16)}
    batches = first_batches(session, args.steps)
    ratios, seconds = [], defaultdict(list)
    for k, batch in enumerate(batches):
        order = list(twins) if k % 2 == 0 else list(reversed(twins))
        for dtype in order:
            start = time.perf_counter()
            optimizer_step(*twins[dtype], [batch])
            seconds[dtype].append(time.perf_counter() - start)
        if k > 0:
            ratios.append(seconds[torch.float32][-1] / seconds[torch.bfloat16][-1])
        if (k + 1) % 25 == 0:
            log.info("step %d: bf16 / fp32 speed so far %s", k + 1, summary(ratios))
    val = session.validation_split
    losses = {
        dtype: teacher_forced_loss(
            s.model, val, DecodeSettings.from_config(s.config.decoding, "cpu", torch.float32)
        )
        for dtype, (s, _) in twins.items()
    }
    fp32, bf16 = losses[torch.float32], losses[torch.bfloat16]
    fp32_s, bf16_s = (statistics.median(seconds[d]) for d in (torch.float32, torch.bfloat16))
    print(f"(d) {len(batches)} steps each, interleaved: fp32 {fp32_s:.2f} s/step, "
          f"bf16 {bf16_s:.2f} s/step")  # fmt: skip
    print(f"  bf16 / fp32 speed: {summary(ratios)}   goal >= 2x")
    print(f"  validation loss after {len(batches)} steps (scored in fp32, {len(val)} pairs): "
          f"fp32 {fp32:.4f}, bf16 {bf16:.4f} ({100 * (bf16 - fp32) / fp32:+.2f}%), "
          "goal within 2%")  # fmt: skip


# Dense bf16 tensor-core peaks from the vendors' data sheets, TFLOP/s, by a part of the name.
BF16_PEAK_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.0, "H200": 989.0, "A100": 312.0}


def bf16_peak_tflops(device: torch.device, given: float | None) -> float | None:
    if given is not None or device.type != "cuda":
        return given
    name = torch.cuda.get_device_name(device)
    return next((peak for part, peak in BF16_PEAK_TFLOPS.items() if part in name), None)


def step_flops(counting: tuple[Session, DataParallel], batch: batching.Batch) -> float:
    """Floating-point operations of one float32 training step on `batch` (forward, backward and
    optimizer), counted by torch.utils.flop_counter on `counting`, a throw-away twin (the count
    does not depend on its weights, so one twin serves every batch)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        optimizer_step(*counting, [batch])
    return float(counter.get_total_flops())


def precisions_and_compile(session: Session, initial: dict, args) -> None:
    """(e): float32, bf16 and bf16 compiled, alternating step by step over the same batches;
    the first --warmup steps (compilation) are left out of the timings."""
    variants = {
        "fp32": twin(session, initial, torch.float32),
        "bf16": twin(session, initial, torch.bfloat16),
        "bf16 + compile": twin(session, initial, torch.bfloat16, compile=True),
    }
    batches = first_batches(session, args.warmup + args.steps)
    tokens = [batch.n_tgt_tokens for batch in batches]
    counting = twin(session, initial, torch.float32)
    flops = [step_flops(counting, batch) for batch in batches[args.warmup :]]
    sync = torch.cuda.synchronize if session.device.type == "cuda" else lambda: None
    seconds: dict[str, list[float]] = defaultdict(list)
    for k, batch in enumerate(batches):
        names = list(variants) if k % 2 == 0 else list(reversed(variants))
        for name in names:
            sync()
            start = time.perf_counter()
            optimizer_step(*variants[name], [batch])
            sync()
            seconds[name].append(time.perf_counter() - start)
        if k + 1 == args.warmup:
            log.info("warm-up (compilation) done after %d steps", k + 1)
    peak = bf16_peak_tflops(session.device, args.peak_tflops)
    timed_tokens, timed_flops = sum(tokens[args.warmup :]), sum(flops)
    steps = len(flops)  # fewer than --steps when an epoch has fewer batches
    print(f"(e) {steps} timed steps each after {args.warmup} warm-up steps, "
          f"{timed_tokens / steps:.0f} real target tokens and "
          f"{timed_flops / steps / 1e12:.3f} TFLOP a step; bf16 peak: "
          f"{f'{peak:g} TFLOP/s' if peak else 'unknown (give --peak-tflops)'}")  # fmt: skip
    base = seconds["fp32"][args.warmup :]
    for name, times in seconds.items():
        timed = times[args.warmup :]
        ratios = [b / t for b, t in zip(base, timed, strict=True)]
        rate = timed_flops / sum(timed) / 1e12
        share = f", {100 * rate / peak:.1f}% of the bf16 peak" if peak else ""
        print(f"  {name:>15}: {timed_tokens / sum(timed):9.0f} tokens/s, {rate:7.2f} TFLOP/s"
              f"{share}; speed against fp32 {summary(ratios)}")  # fmt: skip


def matmul_tflops(device: torch.device, dtype: torch.dtype, *, size: int, repeats: int) -> float:
    """This machine's rate for a (size × size) @ (size × size) matrix product in `dtype` on
    `device`, with torch's current threads: TFLOP/s over `repeats` products after one warm-up."""
    a, b = (torch.randn(size, size, device=device).to(dtype) for _ in range(2))
    out = torch.mm(a, b)
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        torch.mm(a, b, out=out)
    sync()
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e12


def utilisation(session: Session, initial: dict, args) -> None:
    """(f): each timed float32 step is followed by a measurement of the matrix-product peak, so
    that each share pairs a step with the machine's state just after it."""
    pair = twin(session, initial, torch.float32)
    batches = first_batches(session, args.warmup + args.steps)
    device, threads = session.device, torch.get_num_threads()
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    size, repeats = args.matmul_size, args.matmul_repeats
    rates, peaks, one_thread = [], [], []
    for k, batch in enumerate(batches):
        sync()
        start = time.perf_counter()
        optimizer_step(*pair, [batch])
        sync()
        seconds = time.perf_counter() - start
        if k < args.warmup:
            continue
        rates.append(model_step_flops(session.model_args, [batch]) / seconds / 1e12)
        peaks.append(matmul_tflops(device, torch.float32, size=size, repeats=repeats))
        if device.type == "cpu":
            torch.set_num_threads(1)
            one_thread.append(matmul_tflops(device, torch.float32, size=size, repeats=repeats))
            torch.set_num_threads(threads)
    shares = [rate / peak for rate, peak in zip(rates, peaks, strict=True)]
    where = f"{threads} threads" if device.type == "cpu" else torch.cuda.get_device_name(device)
    print(f"(f) model FLOPs utilisation, {len(rates)} float32 steps after {args.warmup} warm-up "
          f"steps on {device.type} ({where}): model {1e3 * statistics.median(rates):.1f} "
          f"GFLOP/s (median)")  # fmt: skip
    print(f"  this machine's float32 matmul peak ({size}x{size}, measured after each step): "
          f"median {1e3 * statistics.median(peaks):.1f} GFLOP/s")  # fmt: skip
    print(f"  share of the measured peak: {100 * statistics.median(shares):.1f}% "
          f"({summary(shares)} as a ratio)")  # fmt: skip
    if one_thread:
        core = [rate / peak for rate, peak in zip(rates, one_thread, strict=True)]
        single = 1e3 * statistics.median(one_thread)
        print(f"  against one thread's matmul rate (median {single:.1f} GFLOP/s): "
              f"{100 * statistics.median(core):.1f}%")  # fmt: skip
    if (peak := device_peak(device)) is not None:
        share = statistics.median(rates) / peak.fp32
        print(f"  share of the {peak.name}'s float32 datasheet peak ({peak.fp32:g} TFLOP/s, "
              f"{peak.source}): {100 * share:.1f}%")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_options(parser)
    parser.add_argument("--short", action="store_true", help="fewer pairs and steps of each part")
    parser.add_argument("--subset", type=int, default=1500, help="training pairs for (a, c)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs over the subset for (a, c)")
    parser.add_argument("--steps", type=int, default=30, help="steps per precision for (d)")
    parser.add_argument("--profile-rows", type=int, default=15, help="0 skips the profile")
    parser.add_argument("--only", choices=["a", "b", "c", "d", "e", "f", "profile"], nargs="*")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--warmup", type=int, default=5, help="untimed first steps for (e)")
    parser.add_argument("--peak-tflops", type=float, help="the device's bf16 peak for (e)")
    parser.add_argument("--matmul-size", type=int, default=2048, help="square product for (f)")
    parser.add_argument("--matmul-repeats", type=int, default=4, help="products per peak in (f)")
    parser.add_argument("--set", action="append", default=[], help="extra config overrides")
    args = parser.parse_args(argv)
    if args.short or args.quick:
        args.subset, args.epochs, args.steps, args.warmup = 600, 2, 6, 2
    if args.quick:
        args.profile_rows = min(args.profile_rows, 5)
        args.matmul_size, args.matmul_repeats = 256, 2
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    parts = set(args.only or ["a", "b", "c", "d", "f", "profile"])
    print(machine())
    overrides = ["train.warmup_steps=100", "train.lr=0.001", f"train.device={args.device}"]
    with training_session(args, [*overrides, *args.set]) as (session, parallel):
        initial = copy.deepcopy(session.model.state_dict())
        if "b" in parts:
            padding(session)
        if parts & {"a", "c"}:
            overhead_and_memory(session, parallel, args)
        if "d" in parts:
            bf16_against_fp32(session, initial, args)
        if "e" in parts:
            precisions_and_compile(session, initial, args)
        if "f" in parts:
            utilisation(session, initial, args)
        if "profile" in parts and args.profile_rows:
            profile_step(session, parallel, args.profile_rows)
    print("load average at the end:", " ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()

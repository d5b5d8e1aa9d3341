"""On a CUDA GPU: float32 against bf16 autocast training steps, bf16 with and without cuDNN's
attention kernel, on the same real Multi30k batches (4,096 tokens, the 7.6M model) from the same
initial weights.

    python bench/cuda_precision.py --steps 60
    python bench/cuda_precision.py --quick      # a tiny toy model, seconds (tests)

The variants alternate step by step over the first --steps batches of an epoch, twice: pass 1
meets every batch shape for the first time, pass 2 meets the same shapes again. Per variant:
target tokens per second, median and slowest step. Then the attention kernels one bf16 step
runs with cuDNN's kernel allowed and with it off (torch.profiler).

cuDNN builds a plan for each new attention shape, and batches of sentences come in many shapes,
so tfm keeps cuDNN's attention kernel off on CUDA (`tfm.device.without_cudnn_attention`); this
shows why. bf16 attention then runs PyTorch's memory-efficient kernel (with a padding mask) and
its flash kernel (causal, no mask). A small model's step is bound by kernel launches, and
autocast adds cast kernels, so bf16 gains nothing there: `train.precision: auto` trains in bf16
on a CUDA GPU that computes in it (Ampere and later), for models large enough for arithmetic to
dominate, and the small-model GPU recipes set `precision: fp32` (configs/multi30k_gpu.yaml).
"""

import argparse
import copy
import statistics
import time
from collections import defaultdict

import torch
from _multi30k import add_data_options, summary, training_session
from train_speed import first_batches, twin

from tfm.api import optimizer_step


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_options(parser)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--set", action="append", default=[], help="extra config overrides")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = min(args.steps, 4)
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    overrides = ["train.warmup_steps=100", "train.lr=0.001", "train.device=cuda", *args.set]
    with training_session(args, overrides) as (session, _):
        initial = copy.deepcopy(session.model.state_dict())
        variants = {  # name: (twin, cuDNN attention allowed)
            "fp32": (twin(session, initial, torch.float32), False),
            "bf16, cuDNN attention": (twin(session, initial, torch.bfloat16), True),
            "bf16, no cuDNN attention": (twin(session, initial, torch.bfloat16), False),
        }
        batches = first_batches(session, args.steps)
        tokens = sum(batch.n_tgt_tokens for batch in batches)
        for name in ("first-seen", "repeated"):
            seconds = defaultdict(list)
            for k, batch in enumerate(batches):
                for variant in list(variants)[:: 1 if k % 2 == 0 else -1]:
                    pair, cudnn = variants[variant]
                    torch.backends.cuda.enable_cudnn_sdp(cudnn)
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    optimizer_step(*pair, [batch])
                    torch.cuda.synchronize()
                    seconds[variant].append(time.perf_counter() - start)
            report(f"{name} shapes", len(batches), tokens, seconds)
        for cudnn in (True, False):
            torch.backends.cuda.enable_cudnn_sdp(cudnn)
            kernels = attention_kernels(variants["bf16, cuDNN attention"][0], batches[0])
            print(f"bf16 attention kernels, cuDNN {'allowed' if cudnn else 'off'}: {kernels}")
        torch.backends.cuda.enable_cudnn_sdp(False)


def report(title: str, steps: int, tokens: int, seconds: dict[str, list[float]]) -> None:
    """Per variant: tokens/s, median and slowest step, and its speed against fp32 (the median of
    the step-by-step ratios)."""
    print(f"{title}, {steps} steps, {tokens / steps:.0f} target tokens a step:")
    base = seconds["fp32"]
    for variant, times in seconds.items():
        median, slowest = 1e3 * statistics.median(times), 1e3 * max(times)
        ratios = [b / t for b, t in zip(base, times, strict=True)]
        print(f"  {variant:>25}: {tokens / sum(times):8.0f} tokens/s, "
              f"median {median:6.1f} ms, slowest {slowest:7.1f} ms; "
              f"speed against fp32 {summary(ratios)}")  # fmt: skip


def attention_kernels(pair, batch) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        optimizer_step(*pair, [batch])
        torch.cuda.synchronize()
    names = {event.key for event in prof.key_averages()}
    words = ("fmha", "flash", "sdpa", "attention")
    return sorted(n[:60] for n in names if any(w in n.lower() for w in words))


if __name__ == "__main__":
    main()

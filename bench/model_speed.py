"""Speed of tfm's Transformer: training throughput against an nn.Transformer reference, and cached
greedy decoding against re-running the whole prefix. Reports ratios measured in one run.

    python bench/model_speed.py            # about 3 minutes on 2 CPU cores
    python bench/model_speed.py --only training --threads 1
    python bench/model_speed.py --short    # 2 steps, 1 round: well under a minute
    python bench/model_speed.py --quick    # a tiny model, seconds (tests)

Training: real target tokens a second of one step (forward, backward, AdamW) of tfm's model
against `ReferenceSeq2Seq`, a model of identical sizes built from `nn.Transformer` as its
tutorials do (with its dropout placement, which includes attention weights and the feed-forward
inside; tfm follows the paper, with attention dropout 0 so that attention stays on the fused
kernel). d_model 256, 3 + 3 layers, 8 heads, d_ff 1024, vocabulary 8,000, tied output
projection, label-smoothed loss. --steps (5) length-bucketed batches of about --batch-tokens
(4,000) target tokens, 11 to 68 positions, the models alternating batch by batch. Both use
PyTorch's fused CPU AdamW (--optimizer fused, the default; 3-5x faster than the for-loop one).

Greedy decoding: sentences a second of `greedy_decode` (key/value cache) against
`greedy_decode_uncached` (re-runs the decoder over the whole prefix each step), --sentences (64)
sources of 15-25 tokens, --output-len (40) output tokens each, the same untrained model; both
must return identical ids.

Variants are interleaved step by step (A B on one batch, then B A on the next, ...) and repeated,
because the machines are shared and the same run varies 10-25% minutes apart: each pair gives
one ratio, and the median ratio is reported with its spread.

Reading the figures. Matrix products are about two thirds of a training step and cost the same
in both models; tfm gains elsewhere: it computes no logits for padding, projects onto the
vocabulary inside the loss 1,024 rows at a time (never holding the logits or their gradient
whole), and keeps attention on the fused kernel, where the reference's attention dropout cannot.
With two threads on cores that other processes also use, decoding's many small operations wait
for the second thread and the decoding ratio falls: decode with one thread on a shared machine.
"""

import argparse
import logging
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _naive_decoding import naive_greedy  # noqa: E402

from tfm.api import (  # noqa: E402
    ModelArgs,
    OutputLimit,
    Transformer,
    build_model,
    greedy_decode,
    projected_loss_sum,
    sinusoidal_table,
)

log = logging.getLogger("bench.model_speed")
PAD, BOS = 0, 1
SIZES = dict(d_model=256, n_heads=8, d_ff=1024, n_layers=3, vocab=8000, max_len=256)
QUICK_SIZES = dict(d_model=32, n_heads=2, d_ff=64, n_layers=1, vocab=200, max_len=128)


class ReferenceSeq2Seq(nn.Module):
    """The same sizes built from `nn.Transformer`, the way its tutorials do: scaled embeddings,
    sinusoidal positions, dropout 0.1 everywhere nn.Transformer puts it (attention weights and
    inside the feed-forward network included), and an output projection tied to the target
    embedding."""

    def __init__(self, *, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int,
                 max_len: int, dropout: float = 0.1) -> None:  # fmt: skip
        super().__init__()
        self.d_model = d_model
        self.src_embedding = nn.Embedding(vocab, d_model)
        self.tgt_embedding = nn.Embedding(vocab, d_model)
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.transformer = nn.Transformer(
            d_model, n_heads, n_layers, n_layers, d_ff, dropout, batch_first=True
        )
        self.output_projection = nn.Linear(d_model, vocab, bias=False)
        self.output_projection.weight = self.tgt_embedding.weight

    def _embed(self, ids: Tensor, embedding: nn.Embedding) -> Tensor:
        x = embedding(ids) * math.sqrt(self.d_model) + self.table[: ids.size(1)]
        return self.dropout(x)

    def forward(self, src_ids: Tensor, tgt_ids: Tensor) -> Tensor:
        src_pad = src_ids == PAD
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_ids.size(1))
        hidden = self.transformer(
            self._embed(src_ids, self.src_embedding), self._embed(tgt_ids, self.tgt_embedding),
            tgt_mask=causal, src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )  # fmt: skip
        return self.output_projection(hidden)


def bucketed_batches(generator: torch.Generator, *, n_batches: int, target_tokens: int,
                     vocab: int) -> list[tuple[Tensor, Tensor]]:  # fmt: skip
    """Batches as a length-bucketing token-budget batcher makes them: random sentence pairs
    (sources of 5-60 tokens, targets within +-20% of their source), sorted by length, cut into
    batches of about `target_tokens` real target tokens; `n_batches` of them, evenly spread over
    the lengths. Sources right-padded; targets BOS + tokens, right-padded."""
    pairs = []
    for _ in range(40 * target_tokens // 30):  # about 40 batches to choose from
        src_len = int(torch.randint(5, 61, (1,), generator=generator))
        scale = 0.8 + 0.4 * float(torch.rand(1, generator=generator))
        pairs.append((src_len, max(1, round(src_len * scale))))
    pairs.sort(key=lambda pair: (pair[1], pair[0]))
    chunks, current, total = [], [], 0
    for pair in pairs:
        current.append(pair)
        total += pair[1]
        if total >= target_tokens:
            chunks.append(current)
            current, total = [], 0
    picked = [
        chunks[round(i * (len(chunks) - 1) / max(1, n_batches - 1))] for i in range(n_batches)
    ]
    return [_pad(chunk, generator, vocab) for chunk in picked]


def _pad(
    pairs: list[tuple[int, int]], generator: torch.Generator, vocab: int
) -> tuple[Tensor, Tensor]:
    src = torch.full((len(pairs), max(p[0] for p in pairs)), PAD)
    tgt = torch.full((len(pairs), max(p[1] for p in pairs) + 1), PAD)
    for row, (src_len, tgt_len) in enumerate(pairs):
        src[row, :src_len] = torch.randint(4, vocab, (src_len,), generator=generator)
        tgt[row, 0] = BOS
        tgt[row, 1 : tgt_len + 1] = torch.randint(4, vocab, (tgt_len,), generator=generator)
    return src, tgt


def make_train_step(model: nn.Module, fused: bool) -> Callable[[Tensor, Tensor], float]:
    """One training step the way tfm's loop does it for tfm's model (the decoder's output at
    real target positions only, projected to the vocabulary inside the loss, chunk by chunk),
    and the way the nn.Transformer tutorials do it for the reference (logits everywhere,
    padding ignored by the loss)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused or None)

    def step(src: Tensor, tgt: Tensor) -> float:
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        if isinstance(model, Transformer):
            real = tgt_out != PAD
            hidden = model(src, tgt_in, keep=real, project=False)  # (N, D)
            weight = model.output_projection.weight
            loss = projected_loss_sum(hidden, weight, tgt_out[real], label_smoothing=0.1)
            loss = loss / real.sum()
        else:
            logits = model(src, tgt_in)  # (B, T, V)
            loss = F.cross_entropy(
                logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1),
                ignore_index=PAD, label_smoothing=0.1,
            )  # fmt: skip
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def training_rate(step: Callable, batch: tuple[Tensor, Tensor]) -> float:
    """Real target tokens per second for one training step on `batch`."""
    tokens = int((batch[1][:, 1:] != PAD).sum())
    start = time.perf_counter()
    step(*batch)
    return tokens / (time.perf_counter() - start)


def interleaved(variants: dict[str, Callable[[object], float]], units: list) -> dict[str, list]:
    """Run every variant on each unit of work in turn, alternating which goes first, so that each
    pair of measurements shares the machine's state of the moment. Returns the rates."""
    names, rates = list(variants), {name: [] for name in variants}
    for index, unit in enumerate(units):
        for name in names if index % 2 == 0 else reversed(names):
            rates[name].append(variants[name](unit))
            log.info("unit %2d  %-10s %10.1f", index + 1, name, rates[name][-1])
    return rates


def report(title: str, unit: str, rates: dict[str, list[float]], ours: str, base: str) -> None:
    ratios = sorted(a / b for a, b in zip(rates[ours], rates[base], strict=True))
    quartiles = (
        statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else ratios * 3
    )
    print(f"\n{title}")
    for name, values in rates.items():
        print(f"  {name:<10} median {statistics.median(values):9.1f} {unit}")
    print(f"  ratio {ours}/{base}: median {statistics.median(ratios):.2f}x over {len(ratios)} "
          f"paired runs (quartiles {quartiles[0]:.2f}-{quartiles[2]:.2f}, "
          f"range {ratios[0]:.2f}-{ratios[-1]:.2f})")  # fmt: skip


def model_args(sizes: dict, **options) -> ModelArgs:
    """tfm's model of `sizes` (SIZES or QUICK_SIZES), with the ModelArgs `options` given."""
    return ModelArgs(
        src_vocab_size=sizes["vocab"], tgt_vocab_size=sizes["vocab"], d_model=sizes["d_model"],
        n_heads=sizes["n_heads"], n_encoder_layers=sizes["n_layers"],
        n_decoder_layers=sizes["n_layers"], d_ff=sizes["d_ff"], max_len=sizes["max_len"], **options,
    )  # fmt: skip


def bench_training(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    ours = build_model(model_args(args.sizes, dropout=0.1, attention_dropout=0.0, pad_id=PAD))
    reference = ReferenceSeq2Seq(**args.sizes)
    generator = torch.Generator().manual_seed(args.seed)
    batches = bucketed_batches(
        generator, n_batches=args.steps, target_tokens=args.batch_tokens, vocab=args.sizes["vocab"]
    )
    fused = args.optimizer == "fused"
    steps = {
        "ours": make_train_step(ours.train(), fused),
        "nn": make_train_step(reference.train(), fused),
    }
    for step in steps.values():  # warm-up: allocator, kernels, optimizer state
        step(*batches[0])
    variants = {name: (lambda b, s=step: training_rate(s, b)) for name, step in steps.items()}
    rates = interleaved(variants, batches * args.rounds)
    shapes = " ".join(f"{tuple(tgt.shape)}" for _, tgt in batches)
    real = sum(int((tgt[:, 1:] != PAD).sum()) for _, tgt in batches)
    shapes += f" ({real / sum(tgt[:, 1:].numel() for _, tgt in batches):.1%} real)"
    title = (f"training (fwd + bwd + {args.optimizer} AdamW), real target tokens/s; "
             f"{args.rounds} rounds over target batches {shapes}")  # fmt: skip
    report(title, "tokens/s", rates, "ours", "nn")


def bench_decoding(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    model = build_model(model_args(args.sizes)).eval()
    generator = torch.Generator().manual_seed(args.seed + 1)
    lengths = torch.randint(15, 26, (args.sentences,), generator=generator)
    src = torch.full((args.sentences, int(lengths.max())), PAD)
    for row, length in enumerate(lengths.tolist()):
        src[row, :length] = torch.randint(4, args.sizes["vocab"], (length,), generator=generator)
    # An EOS id the model never emits: every sentence runs the full `output_len` steps.
    options = dict(bos_id=BOS, eos_id=-1, limit=OutputLimit(0.0, args.output_len))
    limit = min(args.output_len, model.max_len)
    cached = greedy_decode(model, src, **options).tokens
    uncached = naive_greedy(model, src, bos_id=BOS, eos_id=-1, limit=limit)
    if cached != uncached:
        raise SystemExit("cached and uncached greedy decoding disagree")

    def run(decode: Callable[[], object], _: object) -> float:
        start = time.perf_counter()
        decode()
        return args.sentences / (time.perf_counter() - start)

    variants = {
        "cached": lambda unit: run(lambda: greedy_decode(model, src, **options), unit),
        "uncached": lambda unit: run(
            lambda: naive_greedy(model, src, bos_id=BOS, eos_id=-1, limit=limit), unit
        ),
    }
    rates = interleaved(variants, list(range(args.decode_rounds)))
    report(f"greedy decoding, {args.sentences} sources of 15-25 tokens, {args.output_len} output "
           "tokens each (identical ids)", "sentences/s", rates, "cached", "uncached")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=5, help="distinct training batches")
    parser.add_argument("--rounds", type=int, default=4, help="passes over the training batches")
    parser.add_argument("--decode-rounds", type=int, default=8, help="decoding runs per variant")
    parser.add_argument("--batch-tokens", type=int, default=4000, help="target tokens per batch")
    parser.add_argument("--sentences", type=int, default=64, help="sources to decode")
    parser.add_argument("--output-len", type=int, default=40, help="tokens decoded per source")
    parser.add_argument(
        "--optimizer",
        choices=["fused", "default"],
        default="fused",
        help="AdamW implementation for both models (fused is 3-5x faster on CPU)",
    )
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's own choice)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=["training", "decoding"], help="run one benchmark")
    parser.add_argument("--short", action="store_true", help="2 steps, 1 round: a smoke run")
    parser.add_argument("--quick", action="store_true", help="a tiny model, seconds (tests)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every round")
    args = parser.parse_args(argv)
    args.sizes = QUICK_SIZES if args.quick else SIZES
    if args.short or args.quick:
        args.steps, args.rounds, args.decode_rounds = 2, 1, 2
    if args.quick:
        args.batch_tokens, args.sentences, args.output_len = 400, 8, 8
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform_name()}, "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    if args.only in (None, "training"):
        bench_training(args)
    if args.only in (None, "decoding"):
        bench_decoding(args)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} (busy machines give noisy ratios)")


def platform_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


if __name__ == "__main__":
    main()

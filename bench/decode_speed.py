"""Decoding speed on the Multi30k test2016 set: tfm's batched, cached greedy decoding (the
`TorchTranslator`'s search over token ids) against naive decoding, one sentence at a time without
a key/value cache (`_naive_decoding.naive_greedy`); and beam search (beam 5) against greedy.

    python bench/decode_speed.py            # a few minutes on 2 CPU cores
    python bench/decode_speed.py --rounds 4
    python bench/decode_speed.py --run runs/bench/multi30k-de-en --rounds 4 --uncached-per-round 10
    python bench/decode_speed.py --short    # 200 sentences, 2 rounds, about 30 s
    python bench/decode_speed.py --quick    # a tiny toy model, seconds (tests)

Both greedy variants must return identical token ids (checked on every sentence). Output lengths
are fixed the same way for every variant: the output limit of the schema's defaults,
floor(1.5 * S + 10) tokens per sentence (`decoding.max_len_a`, `decoding.max_len_b`); by default
the model is untrained (`--train-steps 0`), and an untrained model practically never emits EOS,
so every sentence runs to that limit: a fixed, known amount of work per sentence, the same for
all variants (the mean output length is printed), and the worst case for beam search. With
`--train-steps N` the model first trains N steps with tfm's own training step, so lengths become
realistic (and shorter); `--run DIR` decodes with a trained run's model and tokenizer instead
(e.g. `bench/multi30k.py`'s), which is how decoding behaves in use: sentences end at EOS.

Rounds interleave the variants (A B, then B A, ...): each round decodes the whole set (1,000
sentences) with the Translator and a new random sample of `--uncached-per-round` sentences one at
a time (the naive way is too slow to run the whole set several times); each round gives one ratio
of sentences per second, and the median ratio is reported. Beam against greedy: each round
decodes one slice of the set (1/rounds of it) both ways. One torch thread by default
(`--threads`): with two threads on cores that other jobs share, decoding's many small operations
stall and vary 5-10x round to round.
"""

import argparse
import logging
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from _multi30k import add_data_options, machine, summary, training_session
from _naive_decoding import naive_greedy

from tfm.api import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Config,
    DecodeSettings,
    RunPaths,
    Tokenizer,
    TorchTranslator,
    Transformer,
    encode_split,
    load_texts,
    load_trained,
    optimizer_step,
    pad,
)

log = logging.getLogger("bench.decode_speed")


def decode_uncached(model: Transformer, sources: Sequence[list[int]], s: DecodeSettings) -> list:
    """The naive baseline: each sentence alone, re-running the decoder over the whole prefix."""
    model.eval()
    outputs = []
    for ids in sources:
        limit = s.limit.tokens(len(ids), model.max_len)
        outputs += naive_greedy(model, pad([ids], PAD_ID), bos_id=BOS_ID, eos_id=EOS_ID,
                                limit=limit)  # fmt: skip
    return outputs


def decoded(translator: TorchTranslator, sources: Sequence[list[int]], s: DecodeSettings):
    """The best output ids of each source by the Translator's search with the settings `s`
    (batched by length; a beam's sentence takes `beam` rows of the batch), in input order."""
    found = translator.search(list(sources), s, list(range(1, len(sources) + 1)), n_best=1,
                              scored=False)  # fmt: skip
    return [hypotheses[0][0] for hypotheses in found]


def timed(fn: Callable[[], list]) -> tuple[float, list]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def brief_training(session, parallel, steps: int) -> None:
    """`steps` of tfm's own training step over the first epoch's batches."""
    data = session.epochs.data(0)
    for k in range(steps):
        batch = data.batch(data.batches[k % len(data.batches)])
        result = optimizer_step(session, parallel, [batch])
        if (k + 1) % 50 == 0:
            log.info("training step %d: loss %.3f", k + 1, result.loss)


def compare_greedy(translator, sources, settings, rounds: int, per_round: int) -> None:
    n = len(sources)
    ratios, rates = [], {"cached": [], "uncached": []}
    reference: dict[int, list[int]] = {}
    sample = torch.randperm(n, generator=torch.Generator().manual_seed(0)).tolist()
    for r in range(rounds):
        part = sample[r * per_round : (r + 1) * per_round]
        runs = {
            "cached": lambda: decoded(translator, sources, settings),
            "uncached": lambda p=part: decode_uncached(
                translator.model, [sources[i] for i in p], settings
            ),
        }
        order = ["cached", "uncached"] if r % 2 == 0 else ["uncached", "cached"]
        seconds = {}
        for name in order:
            seconds[name], out = timed(runs[name])
            if name == "cached":
                cached = out
            else:
                for i, ids in zip(part, out, strict=True):
                    reference[i] = ids
        rate_c, rate_u = n / seconds["cached"], len(part) / seconds["uncached"]
        rates["cached"].append(rate_c)
        rates["uncached"].append(rate_u)
        ratios.append(rate_c / rate_u)
        mismatched = [i for i in part if cached[i] != reference[i]]
        assert not mismatched, f"cached and uncached ids differ for sentences {mismatched[:5]}"
        log.info("round %d: cached %.1f sent/s, uncached %.1f sent/s", r, rate_c, rate_u)
    lengths = [len(t) for t in cached]
    print(f"greedy: {n} sentences, mean output {statistics.mean(lengths):.1f} tokens (max "
          f"{max(lengths)}); uncached on {len(reference)} of them, ids identical")  # fmt: skip
    print(f"  the Translator (batched, cached): {statistics.median(rates['cached']):.1f} sent/s")
    print(f"  one at a time, uncached:          {statistics.median(rates['uncached']):.1f} sent/s")
    print(f"  cached / uncached: {summary(ratios)}   goal >= 5x")


def compare_beam(translator, sources, settings, rounds: int, beam: int) -> None:
    n, ratios, rates = len(sources), [], {"greedy": [], "beam": []}
    wide = settings.asking(translator.config.decoding, {"beam_size": beam})
    for r in range(rounds):
        part = [sources[i] for i in range(r * n // rounds, (r + 1) * n // rounds)]
        runs = {
            "greedy": lambda p=part: decoded(translator, p, settings),
            "beam": lambda p=part: decoded(translator, p, wide),
        }
        seconds = {}
        for name in ["greedy", "beam"] if r % 2 == 0 else ["beam", "greedy"]:
            seconds[name], _ = timed(runs[name])
        rates["greedy"].append(len(part) / seconds["greedy"])
        rates["beam"].append(len(part) / seconds["beam"])
        ratios.append(seconds["beam"] / seconds["greedy"])
        log.info("round %d: beam takes %.2fx greedy's time", r, ratios[-1])
    print(f"beam {beam} vs greedy on {n} sentences ({rounds} slices): greedy "
          f"{statistics.median(rates['greedy']):.1f} sent/s, beam "
          f"{statistics.median(rates['beam']):.1f} sent/s")  # fmt: skip
    print(f"  beam time / greedy time: {summary(ratios)}   goal <= 4x")


def compare(
    model: Transformer, tokenizer: Tokenizer, sources: Sequence[list[int]], args: argparse.Namespace
) -> None:
    """The comparisons: greedy search, and beam search of `args.beam`, with the schema's
    output limit."""
    config = Config.model_validate({"decoding": {"strategy": "greedy"}})
    settings = DecodeSettings.from_config(config.decoding, "cpu", "float32")
    translator = TorchTranslator(model=model, tokenizer=tokenizer, config=config,
                                 settings=settings)  # fmt: skip
    if args.uncached_per_round:
        compare_greedy(translator, sources, settings, args.rounds, args.uncached_per_round)
    if args.beam:
        compare_beam(translator, sources, settings, args.rounds, args.beam)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_options(parser)
    parser.add_argument("--short", action="store_true", help="200 sentences, 2 rounds, 8 naive")
    parser.add_argument("--sentences", type=int, default=1000, help="test2016 sentences to use")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds per comparison")
    parser.add_argument("--uncached-per-round", type=int, default=25,
                        help="naive sentences per round; 0 skips the naive comparison")  # fmt: skip
    parser.add_argument("--train-steps", type=int, default=0, help="train the model first")
    parser.add_argument("--run", help="decode with this trained run's model and tokenizer")
    parser.add_argument("--beam", type=int, default=5, help="beam size; 0 skips beam search")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    if args.short or args.quick:
        args.sentences, args.rounds, args.uncached_per_round = min(args.sentences, 200), 2, 8
    if args.quick:
        args.train_steps = args.train_steps or 3
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine())
    if args.run:
        trained = load_trained(RunPaths(Path(args.run)), torch.device("cpu"))
        src, tgt, report = load_texts(trained.config.data, "test")
        test = encode_split("test", src, tgt, report, trained.tokenizer)
        print(f"model of {args.run} (step {trained.step}); limit floor(1.5 * S + 10) tokens")
        compare(trained.model, trained.tokenizer, test.src[: args.sentences], args)
    else:
        overrides = ["train.warmup_steps=100", "train.lr=0.001"]
        with training_session(args, overrides) as (session, parallel):
            brief_training(session, parallel, args.train_steps)
            src, tgt, report = load_texts(session.config.data, "test")
            test = encode_split("test", src, tgt, report, session.tokenizer)
            print(f"model trained {args.train_steps} steps; limit floor(1.5 * S + 10) tokens")
            compare(session.model, session.tokenizer, test.src[: args.sentences], args)
    print("load average at the end:", " ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()

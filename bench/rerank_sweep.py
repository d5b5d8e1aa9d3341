"""Choose the reranking weight W on the validation split, then score the test split with it.

    PYTHONPATH=src python bench/rerank_sweep.py --run RUN [--ensemble RUN ...] \\
        --rerank-with REVERSE [--rerank-with REVERSE ...] [--beam 5] [--weights 0 1 2 3 4 5]
    PYTHONPATH=src python bench/rerank_sweep.py --quick   # tiny toy runs, seconds (tests)

Each split's beam is decoded once by the forward run (or ensemble) and every hypothesis scored
once by the reverse run(s) (`Reranker.channel_of`); each weight then only re-sorts
(`Reranker.combine`). So a sweep costs one decode and one teacher-forced pass per split, however
many weights it tries, and each of its rows is what `tfm eval --split S --beam-size B
--rerank-with ... --rerank-weight W` reports. Prints one Markdown row per weight (lowercased
BLEU, cased BLEU and length ratio, validation then test) and, last, the weight of the best
validation BLEU (`--choose-by`, lowercased by default: issue 6's goals are lowercased), the first
on a tie. The test column is printed for every weight to show the curve's shape; only the
validation column chooses. --quick first trains a tiny en→de run and its de→en reverse for a few
steps on the built-in toy corpus, in a temporary directory, and sweeps with those.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _multi30k import QUICK_TRAINING  # noqa: E402

from tfm.config import load_config  # noqa: E402
from tfm.data.pipeline import prepare_splits  # noqa: E402
from tfm.evaluation import score_translations  # noqa: E402
from tfm.prediction.opening import TorchTranslator, open_torch  # noqa: E402
from tfm.prediction.reranking import Reranker  # noqa: E402
from tfm.prediction.settings import DecodeRequest  # noqa: E402
from tfm.prediction.translate import split_nbest  # noqa: E402

log = logging.getLogger("rerank_sweep")

SPLITS = ("validation", "test")


def decode_and_score(
    decoding: TorchTranslator,
) -> dict[str, tuple[list, list[list[float]], list[str]]]:
    """Each of SPLITS decoded once by the forward run(s) and its hypotheses scored once by the
    reverse run(s) (`decoding.reranker`): {split: (n-best lists, their channel scores,
    references)}, what `sweep` re-sorts."""
    config, tokenizer = decoding.trained.config, decoding.trained.tokenizer
    splits, _ = prepare_splits(config.data, config.tokenizer, SPLITS, tokenizer=tokenizer)
    beams = {}
    for name in SPLITS:
        split = splits[name]
        nbest = split_nbest(decoding.model, tokenizer, split, decoding.settings)
        channel = decoding.reranker.channel_of(split.src_text, nbest)
        beams[name] = (nbest, channel, split.tgt_text)
        beam_size = decoding.settings.beam_size
        log.info("%s: %d beams of %d decoded and scored", name, len(nbest), beam_size)
    return beams


def sweep(
    reranker: Reranker,
    beams: dict[str, tuple[list, list[list[float]], list[str]]],
    weights: list[float],
) -> dict[float, dict[str, dict]]:
    """tfm's scores of each split's reranked best at each weight: {W: {split: scores}}, from
    each split's (n-best lists, their channel scores, references)."""
    table = {}
    for weight in weights:
        at = dataclasses.replace(reranker, weight=weight)
        table[weight] = {
            split: score_translations([r[0][0] for r in at.combine(nbest, channel)], refs)
            for split, (nbest, channel, refs) in beams.items()
        }
    return table


def choose(table: dict[float, dict[str, dict]], metric: str) -> float:
    """The weight of the best validation score under `metric`, the first (smallest) on a tie."""
    return max(sorted(table), key=lambda weight: table[weight]["validation"][metric])


@contextlib.contextmanager
def quick_runs() -> Iterator[tuple[str, str]]:
    """(forward, reverse): a tiny toy en→de run and its de→en reverse, a few steps each, in a
    temporary directory that is also the working directory meanwhile (so that neither becomes
    the user's last run)."""
    from tfm.training import train

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="tfm-bench-") as tmp:
        os.chdir(tmp)
        try:
            runs = []
            for src, tgt in (("en", "de"), ("de", "en")):
                run = Path(tmp) / f"toy-{src}-{tgt}"
                config = load_config(None, [
                    *QUICK_TRAINING, f"data.src_lang={src}", f"data.tgt_lang={tgt}",
                    f"run_dir={run}", "train.device=cpu",
                ])  # fmt: skip
                train(config, progress_bar=False)
                runs.append(str(run))
            yield runs[0], runs[1]
        finally:
            os.chdir(cwd)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="the forward run")
    parser.add_argument("--ensemble", action="append", default=[], help="more forward runs")
    parser.add_argument("--rerank-with", action="append", help="reverse run(s)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--weights", type=float, nargs="+", default=[0, 1, 2, 3, 3.5, 4, 5])
    parser.add_argument("--choose-by", choices=["bleu_lowercase", "bleu"], default="bleu_lowercase")
    parser.add_argument("--device", default=None)
    parser.add_argument("--quick", action="store_true", help="train tiny toy runs and sweep them")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if args.quick:
        with quick_runs() as (args.run, reverse):
            args.rerank_with, args.beam, args.weights = [reverse], min(args.beam, 3), [0, 1, 2]
            report(args)
    elif not args.run or not args.rerank_with:
        parser.error("give --run and --rerank-with (or --quick)")
    else:
        report(args)


def report(args: argparse.Namespace) -> None:
    """The table of the sweep `args` asks for, and the weight validation chooses."""
    decoding = open_torch(DecodeRequest(
        run=args.run, device=args.device, beam_size=args.beam, ensemble=args.ensemble,
        rerank_with=args.rerank_with, rerank_weight=1.0,
    ))  # fmt: skip
    table = sweep(decoding.reranker, decode_and_score(decoding), args.weights)
    print("| W | validation lc | validation cased | validation length ratio | "
          "test lc | test cased | test length ratio |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for weight, scores in table.items():
        cells = [
            f"{scores[s]['bleu_lowercase']:.2f} | {scores[s]['bleu']:.2f} | "
            f"{scores[s]['length_ratio']}"
            for s in SPLITS
        ]
        print(f"| {weight:g} | {' | '.join(cells)} |")
    best = choose(table, args.choose_by)
    test = table[best]["test"]
    print(
        f"chosen on validation ({args.choose_by}): W {best:g}; test {test['bleu_lowercase']:.2f} "
        f"lowercased, {test['bleu']:.2f} cased ({test['bleu_signature']}), chrF {test['chrf']:.2f}"
    )


if __name__ == "__main__":
    main()

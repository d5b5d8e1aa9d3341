r"""Train and evaluate Multi30k in both directions from the local copy; one table row per run.

    python bench/multi30k.py --minutes 60            # de->en and en->de, CPU
    python bench/multi30k.py --config configs/multi30k_cpu.yaml --directions de-en --minutes 60 \
        --average 5
    python bench/multi30k.py --config configs/multi30k_tiny.yaml --directions en-de --minutes 140 \
        --average 10
    python bench/multi30k.py --config configs/multi30k_tiny.yaml --directions en-de --minutes 120 \
        --average 10 --seeds 2 3 --parallel
    python bench/multi30k.py --directions en-de --minutes 260 --runs runs/bit --seeds 2 3 \
        --parallel --resume
    python bench/multi30k.py --directions de-en --minutes 10 --set train.lr=7e-4
    python bench/multi30k.py --directions de-en --minutes 90 --resume  # 10 -> 90
    python bench/multi30k.py --directions en-de --minutes 90 --resume --alphas 0.6 2
    python bench/multi30k.py --quick --runs runs/quick   # a tiny toy run (tests)

Each run trains `--config` (default `configs/multi30k.yaml`) with its three splits pointed at the
Multi30k copy (train, val, test2016 in --data, else $TFM_MULTI30K, else ../shared/data/multi30k
beside the checkout), for at most --minutes of training clock (it sets `train.max_minutes`),
then scores test2016 with greedy and beam search (and, with --average N, the same two for the
average of the last N checkpoints). Options:

--runs DIR     (default runs/bench) holds the runs, named multi30k-DIRECTION or
               multi30k-DIRECTION-seedS; --set KEY=VALUE adds config overrides.
--seeds S ...  one run per seed (`train.seed`), each scored so, and then every row again for
               the ensemble of the seeds' models (`tfm eval --ensemble`); --parallel trains the
               seeds at the same time, each with an equal share of the CPU threads (their log
               lines led by the run's name; a GPU is shared as it is).
--score        all, ensemble (leaves out the single runs' rows) or none (only trains: a device
               that limits each command's time can train in several --resume calls and score in
               the last).
--resume       continues the runs already in --runs (`tfm train --resume`, from each run's own
               config.yaml, so --config and the first --set flags need not be given again) until
               --minutes of training in all, then scores them the same way.
--alphas A ... each beam row decodes the validation split once per GNMT length penalty alpha and
               scores test2016 with the alpha of the best validation BLEU (cased), named in its
               decoding cell (on Multi30k this did not carry over to test: docs/experiments.md).
--device-name  the device column's label.

Rows are Markdown: direction, decoding, cased sacreBLEU (its default: detokenized, 13a) with
signature, lowercased BLEU, chrF, training minutes (the run's own clock, validation included; an
ensemble's, the sum of its runs'), device, parameters. --quick trains a tiny model for a few
steps on the built-in toy corpus instead (no Multi30k needed) and scores its test split the same
way: the whole script in seconds. The recipes, their results and training times are in
docs/recipes.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from _multi30k import QUICK_TRAINING, ROOT, add_data_options, data_dir, multi30k_data, require_data


def tfm(*args: str) -> str:
    """Run the tfm CLI (this checkout's source), returning stdout; stderr passes through."""
    cmd = [sys.executable, "-m", "tfm", *args]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return done.stdout.strip()


def data_overrides(src: str, tgt: str, args: argparse.Namespace) -> list[str]:
    """The data (and with --quick, model and budget) keys of one direction's run."""
    if args.quick:
        return [*QUICK_TRAINING, f"data.src_lang={src}", f"data.tgt_lang={tgt}"]
    return multi30k_data(data_dir(args.data), src, tgt)


def run_direction(direction: str, args: argparse.Namespace) -> list[str]:
    """Train the direction's run (one per --seeds seed), then score each; with several seeds,
    also their ensembles (`tfm eval --ensemble`): of the runs, and of their averaged models."""
    src, tgt = direction.split("-")
    seeds = args.seeds or [None]
    runs = [run_path(args.runs, direction, seed) for seed in seeds]
    train_runs(runs, src, tgt, seeds, args)
    if args.score == "none":
        return []
    minutes = [training_minutes(run) for run in runs]
    sizes = [parameters(run) for run in runs]
    rows, by_variant = [], {}
    for run, run_minutes, size in zip(runs, minutes, sizes, strict=True):
        name = "" if len(runs) == 1 else f"{run.name}, "
        for decoding, model, beam in decoding_variants(run, args):
            by_variant.setdefault((decoding, beam), []).append(model)
            if args.score == "ensemble" and len(runs) > 1:
                continue
            cells = (f"{run_minutes:.0f}", size)
            rows.append(score_row(src, tgt, name + decoding, [model], beam, cells, args))
    if len(runs) > 1:  # each variant again, as an ensemble of the runs' models
        total = f"{sum(minutes):.0f} ({' + '.join(f'{m:.0f}' for m in minutes)})"
        size = f"{len(runs)} × {sizes[0]}" if len(set(sizes)) == 1 else " + ".join(sizes)
        for (decoding, beam), models in by_variant.items():
            label = f"ensemble of {len(runs)}, {decoding}"
            rows.append(score_row(src, tgt, label, models, beam, (total, size), args))
    return rows


def decoding_variants(run: Path, args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """(label, model run directory, beam size) of each way one run is scored: greedy and beam
    search, and with --average N the same for the average of its last N checkpoints."""
    variants = [("greedy", str(run), 1), (f"beam {args.beam}", str(run), args.beam)]
    if args.average:
        averaged = f"{run}-avg{args.average}"
        shutil.rmtree(averaged, ignore_errors=True)  # from an earlier run of this script
        tfm("average", "--run", str(run), "--last", str(args.average), "--out", averaged)
        variants.append((f"greedy, avg last {args.average}", averaged, 1))
        variants.append((f"beam {args.beam}, avg last {args.average}", averaged, args.beam))
    return variants


def run_path(runs: str, direction: str, seed: int | None) -> Path:
    """The run directory of one direction (and seed, when --seeds names several runs)."""
    name = f"multi30k-{direction}" if seed is None else f"multi30k-{direction}-seed{seed}"
    return Path(runs) / name


def train_runs(
    runs: list[Path], src: str, tgt: str, seeds: list[int | None], args: argparse.Namespace
) -> None:
    """`tfm train` each run, one after the other, or with --parallel all at once, each with
    an equal share of the CPU threads (a GPU is shared as it is)."""
    commands = []
    for run, seed in zip(runs, seeds, strict=True):
        seed_sets = [] if seed is None else ["--set", f"train.seed={seed}"]
        commands.append(train_command(run, src, tgt, args) + seed_sets)
    if not args.parallel:
        for command in commands:
            tfm(*command)
        return
    threads = max(1, (os.cpu_count() or 1) // len(commands))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    jobs, relays = [], []
    for run, command in zip(runs, commands, strict=True):
        job = subprocess.Popen(
            [sys.executable, "-m", "tfm", *command],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        relay = threading.Thread(target=relay_lines, args=(job.stderr, f"[{run.name}] "))
        relay.start()
        jobs.append(job)
        relays.append(relay)
    failed = [str(run) for run, job in zip(runs, jobs, strict=True) if job.wait() != 0]
    for relay in relays:
        relay.join()
    if failed:
        sys.exit(f"training failed: {', '.join(failed)}")


def relay_lines(stream, prefix: str) -> None:
    """Copy a parallel run's stderr to ours line by line, each line led by `prefix`, so that
    the runs' interleaved logs still say which run wrote what."""
    for line in stream:
        sys.stderr.write(prefix + line)
        sys.stderr.flush()
    stream.close()


def score_row(
    src: str,
    tgt: str,
    decoding: str,
    models: list[str],
    beam: int,
    cells: tuple[str, str],
    args: argparse.Namespace,
) -> str:
    """One table row: test2016 scored by the run `models[0]`, as an ensemble with the others;
    `cells` are the training minutes and parameter count as they are to be printed."""
    minutes, size = cells
    options = ["--run", models[0], *[x for m in models[1:] for x in ("--ensemble", m)]]
    options += ["--json", "--beam-size", str(beam)]
    if beam > 1 and args.alphas:
        alpha = best_alpha(options, args.alphas)
        options += ["--length-penalty", str(alpha)]
        decoding += f", α {alpha:g}"
    scores = json.loads(tfm("eval", *options))
    signature = scores["bleu_signature"].replace("|", "\\|")  # a table cell
    return (
        f"| {src}→{tgt} | {decoding} | {scores['bleu']:.1f} ({signature}) | "
        f"{scores['bleu_lowercase']:.1f} | {scores['chrf']:.1f} | {minutes} | "
        f"{args.device_name} | {size} |"
    )


def train_command(run: Path, src: str, tgt: str, args: argparse.Namespace) -> list[str]:
    """`tfm train` arguments for one direction; a resume starts from the run's own config.yaml,
    so the keys a resume may not change need not be repeated as --set (budgets still may be)."""
    config = args.config
    if args.resume:
        config = str(run / "config.yaml")
        if not Path(config).is_file():
            sys.exit(f"--resume: {config} not found; is {run} a run of this script?")
    sets = data_overrides(src, tgt, args) + [f"run_dir={run}", f"train.max_minutes={args.minutes}"]
    sets += args.set or []
    command = ["train", "--config", config, "--resume" if args.resume else "--overwrite"]
    return [*command, "--no-progress", *[x for s in sets for x in ("--set", s)]]


def best_alpha(options: list[str], alphas: list[float]) -> float:
    """The length penalty of the best cased BLEU on the validation split (the first on a tie)."""
    bleu = {}
    for alpha in alphas:
        scores = tfm("eval", *options, "--split", "validation", "--length-penalty", str(alpha))
        bleu[alpha] = json.loads(scores)["bleu"]
        print(f"validation, {options[1]}, alpha {alpha:g}: BLEU {bleu[alpha]:.2f}", file=sys.stderr)
    return max(alphas, key=lambda alpha: bleu[alpha])


def training_minutes(run: Path) -> float:
    """The training clock (`train.max_minutes` counts it) of the checkpoint a resume would take."""
    from tfm.api import CheckpointStore, RunPaths

    newest = CheckpointStore(RunPaths(run).checkpoints).latest_loadable()
    return newest.state["progress"]["elapsed_s"] / 60


def parameters(run: Path) -> str:
    """The model's parameter count, tied weights once, from its shape (a model file written from
    a GPU before tied weights were kept tied held them once per name)."""
    import torch

    from tfm.api import ModelArgs, parameter_count

    state = torch.load(run / "best.pt", weights_only=True, map_location="cpu")
    return f"{parameter_count(ModelArgs.from_stored(state['model_args'])) / 1e6:.1f}M"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_options(parser)
    parser.add_argument("--directions", nargs="+", default=["de-en", "en-de"])
    parser.add_argument("--config", default=str(ROOT / "configs" / "multi30k.yaml"))
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--average", type=int, default=0, help="also average the last N")
    parser.add_argument("--runs", default="runs/bench")
    parser.add_argument("--device-name", default="2-core CPU")
    parser.add_argument("--set", action="append", help="extra config overrides")
    parser.add_argument(
        "--alphas", type=float, nargs="+", help="beam length penalties to choose from on validation"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue the runs in --runs to --minutes in all"
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", help="one run per seed (train.seed), and their ensembles"
    )
    parser.add_argument(
        "--parallel", action="store_true", help="train the --seeds runs at the same time"
    )
    parser.add_argument(
        "--score",
        choices=["all", "ensemble", "none"],
        default="all",
        help="rows to score: all; with --seeds, only the ensemble's; none (train only)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.config, args.beam = str(ROOT / "configs" / "toy.yaml"), min(args.beam, 3)
        if args.directions == parser.get_default("directions"):
            args.directions = ["en-de"]
    else:
        require_data(args.data)  # exits at once when the copy is missing
    print("| direction | decoding | BLEU (cased, sacreBLEU) | BLEU (lowercased) | chrF | "
          "train min | device | parameters |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for direction in args.directions:
        for row in run_direction(direction, args):
            print(row, flush=True)


if __name__ == "__main__":
    main()

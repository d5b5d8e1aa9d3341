"""Back-translation's choices one at a time: each thing the plan decides, changed alone, in the
same budget, by hand with the pieces a user has (docs/recipes.md, "By hand").

    PYTHONPATH=src python bench/backtranslation_choices.py --pairs en-fr en-tr --seeds 2 \\
        --minutes 30 --parallel 2 --runs DIR --json rows.json
    PYTHONPATH=src python bench/backtranslation_choices.py --choices plan no-tag --pairs en-fr
    PYTHONPATH=src python bench/backtranslation_choices.py --quick      # a tiny toy pair (tests)

For each pair (a folder of `--data` with train, validation and test text files, en→X or X→en
with `--into-english`) and seed, the recipe's steps by hand, in one budget of `--minutes`:

1. the reverse run: a data-only config of the pair the other way round, with `train.max_minutes`
   its share of the budget, its last checkpoints averaged as its plan says (`tfm average`);
2. the synthetic sources: `tfm translate --file` of the target language's monolingual text
   (`--mono DIR/LANG.txt`), at most 4 lines a real pair drawn by the seed and kept in file
   order, less empty lines, lines with a tab and lines equal to a validation or test sentence;
3. the pair: a data-only config whose `data.train` is its real pairs (`repeat`) and the
   synthetic TSV (`tag: bt`), in the batches the pair alone would get (its `train.max_tokens`,
   read from `tfm config show`), for what the first two steps left of the budget (their wall
   time); then averaged and scored on the test split as the plan says (`tfm eval`).

The choices, each one change from `plan` (what a run with `data.monolingual` does):

    plan           greedy generation, the tag, the real pairs once an epoch for every two
                   synthetic pairs a real pair has (twice at 4, at least once), the reverse
                   run a quarter of the budget
    sampling       generation by sampling from the whole distribution (Edunov et al., 2018)
    beam           generation by beam search, 5 wide
    no-tag         the synthetic sources without the tag (Caswell et al., 2019)
    real-x1        the real pairs once an epoch (1:4 at 4 synthetic pairs a real one)
    real-x4        the real pairs four times an epoch (1:1 at 4)
    reverse-0.15   the reverse run 15% of the budget
    reverse-0.40   the reverse run 40% of the budget

Steps that choices share run once: a reverse run per share, a generation per reverse run and
decoding. Unlike the automatic path, the pair learns its own tokenizer (on its real and
synthetic pairs) instead of the reverse run's; every choice is measured the same way, so they
compare. The table: pair, choice, seed, the reverse run's minutes and test BLEU, the synthetic
pairs and their sentences a second, the pair's minutes, steps and test BLEU / chrF. `--json
FILE` keeps the rows (written after each).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from pairs import (
    DATA,
    MONO,
    SPLITS,
    add_run_options,
    averaged,
    direction,
    reported,
    tfm,
    toy_pairs,
    tried,
)

CHOICES: dict[str, dict] = {
    "plan": {},
    "sampling": {"strategy": "sampling"},
    "beam": {"strategy": "beam"},
    "no-tag": {"tag": None},
    "real-x1": {"repeat": 1},
    "real-x4": {"repeat": 4},
    "reverse-0.15": {"reverse_share": 0.15},
    "reverse-0.40": {"reverse_share": 0.40},
}
# repeat None: the plan's rule, the real pairs once an epoch for every two synthetic pairs a real
# pair has (twice at 4 a real pair, at least once).
PLAN = {"strategy": "greedy", "tag": "bt", "repeat": None, "reverse_share": 0.25}
SYNTHETIC_PER_REAL = 4
# --quick: tiny models that stop after 12 steps, not at a clock (the budget is still split).
QUICK = [
    f"--set={key}"
    for key in (
        "train.max_steps=12",
        "train.validate_every=6",
        "train.max_minutes=null",
        "model.d_model=32",
        "model.n_heads=4",
        "model.d_ff=64",
    )
]


class Shared:
    """Steps that several choices need, each run once (by the first thread to ask) and kept."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.locks: dict[str, threading.Lock] = {}
        self.done: dict[str, dict] = {}

    def once(self, key: str, make) -> dict:
        with self.lock:
            lock = self.locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self.done:
                self.done[key] = make()
            return self.done[key]


def write_config(path: Path, settings: dict) -> Path:
    path.write_text(yaml.safe_dump(settings, sort_keys=False, allow_unicode=True), "utf-8")
    return path


def splits(base: Path, *, train: object) -> dict:
    """The data section's splits: `train` as given, validation and test the pair's text files."""
    return {"train": train, **{s: {"format": "text", "path": f"{base}/{s}"} for s in SPLITS[1:]}}


def data_only(pair: str, name: str, args, folder: Path, *, train: dict,
              reverse: bool = False) -> Path:  # fmt: skip
    """The data-only config file of the pair's own files (the other way round with `reverse`),
    with `train` and the thread count."""
    src, tgt = direction(pair, args)
    base = Path(args.data) / pair
    return write_config(folder / f"{name}.yaml", {
        "run_dir": str(folder / name),
        "data": {"src_lang": tgt if reverse else src, "tgt_lang": src if reverse else tgt,
                 **splits(base, train={"format": "text", "path": f"{base}/train"})},
        "train": {**train, "threads": args.threads},
    })  # fmt: skip


def training_args(args: argparse.Namespace) -> list[str]:
    return ["--no-progress", "--overwrite", *(QUICK if args.quick else [])]


def reverse_run(pair: str, seed: int, share: float, args, folder: Path, log: Path) -> dict:
    """Step 1: the reverse run trained and averaged; its minutes (wall) and test BLEU."""
    name = f"{pair}-reverse-{share:g}-s{seed}"
    config = data_only(pair, name, args, folder, reverse=True,
                       train={"max_minutes": args.minutes * share, "seed": seed})  # fmt: skip
    started = time.monotonic()
    tfm("train", "--config", str(config), *training_args(args), log=log)
    run = averaged(folder / name, folder / f"{name}-avg", log)
    minutes = (time.monotonic() - started) / 60
    scores = json.loads(tfm("eval", "--run", str(run), "--json", log=log))
    return {"run": str(run), "minutes": minutes, "bleu": scores["bleu"]}


def chosen_lines(pair: str, seed: int, args) -> list[str]:
    """The monolingual lines to back-translate (module docstring, step 2)."""
    src, tgt = direction(pair, args)
    base = Path(args.data) / pair
    held = {line for split in SPLITS[1:]
            for line in Path(f"{base}/{split}.{tgt}").read_text("utf-8").splitlines()}  # fmt: skip
    real = len(Path(f"{base}/train.{tgt}").read_text("utf-8").splitlines())
    text = Path(args.mono, f"{tgt}.txt").read_text("utf-8").splitlines()
    usable = [i for i, line in enumerate(text) if line.strip() and "\t" not in line
              and line not in held]  # fmt: skip
    count = min(len(usable), SYNTHETIC_PER_REAL * real)
    return [text[i] for i in sorted(random.Random(seed).sample(usable, count))]


def generation(pair: str, seed: int, choice: dict, reverse: dict, args, folder: Path,
               log: Path) -> dict:  # fmt: skip
    """Step 2: the synthetic TSV (generated source, a tab, the monolingual line); its minutes,
    its pairs and their sentences a second."""
    lines = chosen_lines(pair, seed, args)
    name = f"{pair}-synthetic-{choice['reverse_share']:g}-{choice['strategy']}-s{seed}"
    source = folder / f"{name}.txt"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    options = ["--strategy", choice["strategy"]]  # sampling: top_k 0 and top_p 1, from all
    options += {"beam": ["--beam-size", "5"], "sampling": ["--seed", str(seed)]}.get(
        choice["strategy"], []
    )
    started = time.monotonic()
    out = tfm("translate", "--run", reverse["run"], "--file", str(source), "--threads",
              str(args.threads), *options, log=log, strip=False)  # fmt: skip
    seconds = time.monotonic() - started
    made = translations(out)
    if len(made) != len(lines):
        raise RuntimeError(f"{name}: {len(made)} translations of {len(lines)} lines; see {log}")
    tsv = folder / f"{name}.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in zip(made, lines, strict=True)), "utf-8")
    return {"path": str(tsv), "pairs": len(lines), "minutes": seconds / 60,
            "per_second": len(lines) / max(seconds, 1e-9)}  # fmt: skip


def translations(stdout: str) -> list[str]:
    """`tfm translate`'s translations, one a line, an empty one (first or last too) an empty
    line."""
    return stdout.split("\n")[:-1] if stdout else []


def pair_batch(pair: str, args, folder: Path, log: Path) -> int:
    """The `train.max_tokens` the recipe gives the pair alone (its data-only config)."""
    config = data_only(pair, f"{pair}-alone", args, folder, train={"max_minutes": args.minutes})
    return int(yaml.safe_load(tfm("config", "show", "--config", str(config), log=log))["train"]
               ["max_tokens"])  # fmt: skip


def measure(job: tuple[str, str, int], args, folder: Path, shared: Shared) -> dict:
    """One choice on one pair and seed: the three steps, the row."""
    pair, name, seed = job
    choice = {**PLAN, **CHOICES[name]}
    log = folder / f"{pair}-{name}-s{seed}.log"
    share = choice["reverse_share"]
    reverse = shared.once(f"reverse {pair} {share} {seed}",
                          lambda: reverse_run(pair, seed, share, args, folder, log))  # fmt: skip
    made = shared.once(
        f"generation {pair} {share} {choice['strategy']} {seed}",
        lambda: generation(pair, seed, choice, reverse, args, folder, log),
    )
    batch = shared.once(f"batch {pair}", lambda: {"tokens": pair_batch(pair, args, folder, log)})
    src, tgt = direction(pair, args)
    base = Path(args.data) / pair
    synthetic = {"format": "tsv", "path": made["path"], "columns": [src, tgt]}
    if choice["tag"]:
        synthetic["tag"] = choice["tag"]
    minutes = args.minutes - reverse["minutes"] - made["minutes"]
    real = len(Path(f"{base}/train.{tgt}").read_text("utf-8").splitlines())
    repeat = choice["repeat"] or max(1, math.floor(made["pairs"] / real / 2))
    run_name = f"{pair}-{name}-s{seed}"
    config = write_config(folder / f"{run_name}.yaml", {
        "run_dir": str(folder / run_name),
        "data": {"src_lang": src, "tgt_lang": tgt, **splits(base, train=[
            {"format": "text", "path": f"{base}/train", "repeat": repeat}, synthetic])},
        "train": {"max_minutes": round(minutes, 3), "threads": args.threads, "seed": seed,
                  "max_tokens": batch["tokens"]},
    })  # fmt: skip
    tfm("train", "--config", str(config), *training_args(args), log=log)
    run = averaged(folder / run_name, folder / f"{run_name}-avg", log)
    scores = json.loads(tfm("eval", "--run", str(run), "--json", log=log))
    events = [
        json.loads(line) for line in (folder / run_name / "metrics.jsonl").open(encoding="utf-8")
    ]
    return {
        "pair": f"{src}→{tgt}",
        "choice": name,
        "seed": seed,
        "reverse_minutes": round(reverse["minutes"], 2),
        "reverse_bleu": reverse["bleu"],
        "synthetic": made["pairs"],
        "per_second": round(made["per_second"], 1),
        "pair_minutes": round(minutes, 2),
        "steps": max(event.get("step", 0) for event in events),
        "bleu": scores["bleu"],
        "chrf": scores["chrf"],
    }


def table(rows: list[dict]) -> str:
    head = ("| pair | choice | seed | reverse min | reverse BLEU | synthetic | sent/s | pair min "
            "| steps | BLEU | chrF |\n|" + "---|" * 11)  # fmt: skip
    body = [
        f"| {r['pair']} | {r['choice']} | {r['seed']} | {r['reverse_minutes']:.1f} | "
        f"{r['reverse_bleu']:.1f} | {r['synthetic']:,} | {r['per_second']:.0f} | "
        f"{r['pair_minutes']:.1f} | {r['steps']:,} | {r['bleu']:.1f} | {r['chrf']:.1f} |"
        for r in rows
    ]
    return "\n".join([head, *body])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(DATA), help="folder of pair folders (en-X)")
    parser.add_argument("--mono", default=str(MONO), help="folder of LANG.txt")
    parser.add_argument("--pairs", nargs="+", default=["en-fr", "en-tr"])
    parser.add_argument("--into-english", action="store_true", help="train X→en")
    parser.add_argument("--choices", nargs="+", default=list(CHOICES), choices=list(CHOICES))
    add_run_options(parser, seeds=2, minutes=30.0)
    args = parser.parse_args(argv)
    folder = Path(args.runs or tempfile.mkdtemp(prefix="tfm-bt-choices-"))
    folder.mkdir(parents=True, exist_ok=True)
    if args.quick:  # steps, not minutes, end each run
        args.data, args.pairs, args.minutes = str(toy_pairs(folder / "data")), ["en-de"], 5.0
        args.mono, args.seeds = str(folder / "data" / "mono"), 1
        tested = (folder / "data" / "en-de" / "test.de").read_text("utf-8").splitlines()[0]
        with open(folder / "data" / "mono" / "de.txt", "a", encoding="utf-8") as mono:
            mono.write(f"\n{tested}\n")  # lines to leave out: an empty one, a test sentence
    if "plan" not in args.choices:
        args.choices = ["plan", *args.choices]  # what each choice is measured against
    # Choice by choice, so that runs side by side are of different pairs or seeds: choices of
    # one pair and seed share its reverse run, which the first of them trains while the
    # others wait.
    jobs = [(pair, name, seed) for name in args.choices
            for seed in range(args.first_seed, args.first_seed + args.seeds)
            for pair in args.pairs]  # fmt: skip
    shared = Shared()
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        # One at a time in this thread: `tfm train` in this process (tests) needs the main one.
        each = map if args.parallel == 1 else pool.map
        made = each(lambda job: tried("-".join(map(str, job)), measure, job, args, folder, shared),
                    jobs)  # fmt: skip
        return reported(made, args, table)


if __name__ == "__main__":
    main()

"""Train each English→X pair of a folder of corpora under one fixed budget, and score it.

    PYTHONPATH=src python bench/pairs.py                           # six Tatoeba pairs, derived
    PYTHONPATH=src python bench/pairs.py --pairs en-fr en-tr --variants derived example wide
    PYTHONPATH=src python bench/pairs.py --quick                   # a tiny toy pair (tests)

Every run starts from a data-only config (run_dir and data: the recipe plans the rest) with
the same budget, `train.max_minutes` (default 15, validation included) on `--threads` threads
(default 1), and is scored on the test split the way its plan says: the last `average_last`
checkpoints averaged (`tfm average`) and decoded with the planned beam (`tfm eval`). A variant
adds keys to the data-only config:

- derived: nothing; the recipe from the data;
- example: the settings of a fixed hand-written recipe (the 7.6M model, a 8,000 BPE vocabulary,
  4,096-token batches, peak rate 1e-3 after 800 steps, §5.3's decay) for a corpus of ~30k pairs;
- wide, large-batch, big-vocab, low-dropout: the recipe with one choice changed (the 7.6M
  model's d_model 256 shape, 2,048-token batches, an 8,000 BPE vocabulary, or dropout 0.1).

`--parallel N` trains N runs at a time (each on `--threads`); runs of one pair go together, so
that the variants of a pair share the machine's load. The table: pair, variant, model and batch
of the plan, steps, test BLEU (sacreBLEU's tokenizer for the language) and chrF, the <unk> rate of
the test split under the run's tokenizer, and the minutes `tfm train` took (planning and data
preparation included). `--json FILE` keeps the rows (written after each run, so a long run cut
short keeps what it measured).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from tfm.api import UNK_ID, Tokenizer, generate_toy_corpus

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "tatoeba"
PAIRS = ("en-fr", "en-it", "en-tr", "en-uk", "en-he", "en-ja")

VARIANTS: dict[str, dict] = {
    "derived": {},
    "example": {
        "tokenizer": {"vocab_size": 8000},
        "model": {"d_model": 256, "n_heads": 8, "n_encoder_layers": 3, "n_decoder_layers": 3,
                  "d_ff": 1024},
        "train": {"max_epochs": 30, "max_tokens": 4096, "lr": 1e-3, "warmup_steps": 800,
                  "validate_every": 500, "patience": 5, "checkpoint_every": 100, "keep_last": 10},
    },
    "wide": {"model": {"d_model": 256, "n_heads": 4, "n_encoder_layers": 3,
                       "n_decoder_layers": 3, "d_ff": 1024}},
    "large-batch": {"train": {"max_tokens": 2048}},
    "big-vocab": {"tokenizer": {"vocab_size": 8000}},
    "low-dropout": {"model": {"dropout": 0.1}},
}  # fmt: skip


def tfm(*args: str, log: Path) -> str:
    """Run the tfm command line; stdout returned, stderr appended to `log`."""
    with log.open("a", encoding="utf-8") as err:
        done = subprocess.run(
            [sys.executable, "-m", "tfm", *args], stdout=subprocess.PIPE, stderr=err, text=True
        )
    if done.returncode != 0:
        raise RuntimeError(f"tfm {' '.join(args)} failed ({done.returncode}); see {log}")
    return done.stdout.strip()


def config_for(pair: str, variant: str, args: argparse.Namespace, folder: Path) -> Path:
    """The run's config file: data-only, the budget, and the variant's keys."""
    src, tgt = pair.split("-")
    base = str(Path(args.data) / pair)
    config: dict = {
        "run_dir": str(folder / f"{pair}-{variant}"),
        "data": {
            "src_lang": src,
            "tgt_lang": tgt,
            **{split: {"format": "text", "path": f"{base}/{split}"} for split in SPLITS},
        },
        "train": {"max_minutes": args.minutes, "threads": args.threads},
    }
    for section, keys in VARIANTS[variant].items():
        config.setdefault(section, {}).update(keys)
    path = folder / f"{pair}-{variant}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


SPLITS = ("train", "validation", "test")


def run(pair: str, variant: str, args: argparse.Namespace, folder: Path) -> dict:
    """Train, average as planned, evaluate as planned; the table row."""
    config = config_for(pair, variant, args, folder)
    log = folder / f"{pair}-{variant}.log"
    started = time.monotonic()
    run_dir = folder / f"{pair}-{variant}"
    try:
        tfm("train", "--config", str(config), "--no-progress", log=log)
    except RuntimeError:  # a time limit that leaves no usable model fails the command: score it
        if not (run_dir / "best.pt").exists():
            raise
    minutes = (time.monotonic() - started) / 60  # planning and data preparation included
    planned = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    scored = run_dir
    # A run the clock stopped early may hold fewer checkpoints than its plan averages.
    last = min(planned["train"]["average_last"], len(list((run_dir / "checkpoints").glob("*.pt"))))
    if last > 1:
        averaged = folder / f"{pair}-{variant}-avg"
        tfm("average", "--run", str(run_dir), "--last", str(last), "--out", str(averaged), log=log)
        scored = averaged
    scores = json.loads(tfm("eval", "--run", str(scored), "--json", log=log))
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").open(encoding="utf-8")]
    steps = max(event.get("step", 0) for event in events)
    m, t = planned["model"], planned["train"]
    return {
        "pair": pair,
        "variant": variant,
        "plan": f"d{m['d_model']} {m['n_encoder_layers']}+{m['n_decoder_layers']} ff{m['d_ff']}, "
        f"vocab {planned['tokenizer']['vocab_size']}, batch {t['max_tokens']}, "
        f"beam {planned['decoding']['beam_size']}, avg {t['average_last']}",
        "steps": steps,
        "bleu": scores["bleu"],
        "chrf": scores["chrf"],
        "unk_rate": unk_rate(run_dir, Path(args.data) / pair / "test", pair),
        "minutes": round(minutes, 1),
    }


def unk_rate(run_dir: Path, prefix: Path, pair: str) -> float:
    """The share of `<unk>` among the test split's subword tokens, both sides, under the run's
    tokenizer."""
    tokenizer = Tokenizer.load(run_dir)
    src, tgt = pair.split("-")
    ids = tokenizer.encode_src(_lines(prefix, src)) + tokenizer.encode_tgt(_lines(prefix, tgt))
    tokens = sum(len(row) for row in ids)
    return sum(row.count(UNK_ID) for row in ids) / max(tokens, 1)


def _lines(prefix: Path, lang: str) -> list[str]:
    return Path(f"{prefix}.{lang}").read_text(encoding="utf-8").splitlines()


def toy_pairs(folder: Path) -> Path:
    """Two tiny English–German pairs of the built-in toy corpus as text files (for --quick),
    under the language codes de and nl so that each is a pair of its own."""
    corpus = generate_toy_corpus(n_train=400, n_validation=20, n_test=20, seed=1)
    for tgt in ("de", "nl"):
        for split, pairs in corpus.items():
            base = folder / f"en-{tgt}" / split
            base.parent.mkdir(parents=True, exist_ok=True)
            Path(f"{base}.en").write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
            Path(f"{base}.{tgt}").write_text("".join(g + "\n" for _, g in pairs), encoding="utf-8")
    return folder


def table(rows: list[dict]) -> str:
    head = "| pair | variant | plan | steps | BLEU | chrF | <unk> | minutes |\n|" + "---|" * 8
    body = [
        f"| {r['pair']} | {r['variant']} | {r['plan']} | {r['steps']} | {r['bleu']:.1f} | "
        f"{r['chrf']:.1f} | {r['unk_rate']:.4f} | {r['minutes']:.1f} |"
        for r in rows
    ]
    return "\n".join([head, *body])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("TFM_TATOEBA", str(DATA)))
    parser.add_argument("--pairs", nargs="+", default=list(PAIRS))
    parser.add_argument("--variants", nargs="+", default=["derived"], choices=list(VARIANTS))
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument(
        "--runs", default=None, help="folder of the runs (default: a temporary one)"
    )
    parser.add_argument("--json", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    folder = Path(args.runs or tempfile.mkdtemp(prefix="tfm-pairs-"))
    folder.mkdir(parents=True, exist_ok=True)
    if args.quick:
        args.data, args.pairs, args.minutes = (
            str(toy_pairs(folder / "data")),
            ["en-de"],
            0.05,
        )
    jobs = [(pair, variant) for pair in args.pairs for variant in args.variants]
    rows: list[dict] = []
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        for row in pool.map(lambda job: run(*job, args, folder), jobs):
            rows.append(row)
            print(table([row]).splitlines()[-1], flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(f"\nbudget: {args.minutes:g} minutes on {args.threads} thread(s) a run\n")
    print(table(rows))


if __name__ == "__main__":
    main()

"""Train each English→X pair of a folder of corpora under one fixed budget, and score it.

    PYTHONPATH=src python bench/pairs.py                           # six Tatoeba pairs, derived
    PYTHONPATH=src python bench/pairs.py --pairs en-fr en-tr --variants derived example wide
    PYTHONPATH=src python bench/pairs.py --pairs en-fr --seeds 3   # the seed spread
    PYTHONPATH=src python bench/pairs.py --pairs en-fr --sweep train.lr=0.5x,2x
    PYTHONPATH=src python bench/pairs.py --pairs en-fr --load start  # a machine that slows down
    PYTHONPATH=src python bench/pairs.py --variants derived mono --minutes 60   # back-translation
    PYTHONPATH=src python bench/pairs.py --pairs en-fr --into-english --variants derived mono
    PYTHONPATH=src python bench/pairs.py --pairs en-it --variants derived related \
        --related en-it=en-fr,en-pt                                # related pairs in one model
    PYTHONPATH=src python bench/pairs.py --quick                   # a tiny toy pair (tests)

Every run starts from a data-only config (run_dir and data: the recipe plans the rest) with
the same budget, `train.max_minutes` (default 15, validation included) on `--threads` threads
(default 1), and is scored on the test split the way its plan says: the last `average_last`
checkpoints averaged (`tfm average`) and decoded with the planned beam (`tfm eval`). A variant
adds keys to the data-only config:

- derived: nothing; the recipe from the data;
- example: the settings of a fixed hand-written recipe (the 7.6M model, a 8,000 BPE vocabulary,
  4,096-token batches, peak rate 1e-3 after 800 steps, §5.3's decay) for a corpus of ~30k pairs;
- mono: the data-only config with the target language's monolingual text of `--mono DIR`
  (`DIR/{lang}.txt`, default the shared `tatoeba-mono`) as `data.monolingual`: back-translation
  inside the same budget; the last column says what its phases did;
- related: the data-only config with the training splits of the pairs `--related PAIR=P,Q`
  names as `data.related` (one-to-many; many-to-one with `--into-english`): its last column
  is the mix the plan chose; `P*K` gives P's `repeat` K (a helper in another script is then
  kept);
- the recipe with one choice changed: small-batch and large-batch (512- and 2,048-token
  batches), narrow and wide (a d_model 96 shape of 2 + 2 layers, and the 7.6M model's d_model
  256 shape of 3 + 3), low-rate and high-rate (peak 7e-4 and 2.8e-3, half and twice what the
  recipe gives the d_model 128 shapes), low-dropout (0.1) and big-vocab (8,000 BPE).

`--sweep KEY=V1,V2,…` adds a variant for each value of one config key (`train.lr=7e-4,2.8e-3`);
a value ending in `x` scales the derived plan's value for that pair (`train.lr=0.5x,2x`), read
from `tfm config show`. `--sweep-on VARIANT` gives each value to that variant instead of the
data-only config (`--sweep-on related --sweep data.main_share=0.35,0.65`). `--seeds N` trains
every run with `train.seed` 0 … N-1 (`--first-seed K`: K … K+N-1, to add seeds to runs already
measured).

`--load start` starts a competing process (one thread of matrix products) once a run's plan is
timed, so that the machine slows down mid-run; `--load stop` runs it while the plan is timed
and stops it then, so that the machine speeds up. A plan from the time budget re-times itself
as it trains: `used` (the share of the budget the run took) and `lr end` (its last learning
rate over its peak; the decay's floor is 0.3) say whether it ended its decay at the budget.

`--into-english` trains each pair the other way round (X→en); a row names its direction
(tr→en) and, in `--json`, its data folder too (`pair`: en-tr).

`--parallel N` trains N runs at a time (each on `--threads`); runs of one pair go together, so
that the variants of a pair share the machine's load. The table: direction, variant, seed, model and
batch of the plan, the steps planned at the start and trained, the budget used, the last rate
over the peak, test BLEU (sacreBLEU's tokenizer for the language) and chrF, the <unk> rate of
the test split under the run's tokenizer, the minutes `tfm train` took (planning and data
preparation included), the machine's load average meanwhile, and for a run with monolingual
text its phases (the reverse run's steps, the synthetic pairs, the real pairs' repeat).
`--json FILE` keeps the rows (written after each run, so a long run cut short keeps what it
measured).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from tfm.api import UNK_ID, Tokenizer, generate_toy_corpus

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "tatoeba"
MONO = ROOT.parent / "shared" / "data" / "tatoeba-mono"
PAIRS = ("en-fr", "en-it", "en-tr", "en-uk", "en-he", "en-ja")

VARIANTS: dict[str, dict] = {
    "derived": {},
    "mono": {},  # data.monolingual, from --mono (config_for)
    "related": {},  # data.related, from --related (config_for)
    "example": {
        "tokenizer": {"vocab_size": 8000},
        "model": {"d_model": 256, "n_heads": 8, "n_encoder_layers": 3, "n_decoder_layers": 3,
                  "d_ff": 1024},
        "train": {"max_epochs": 30, "max_tokens": 4096, "lr": 1e-3, "warmup_steps": 800,
                  "validate_every": 500, "patience": 5, "checkpoint_every": 100, "keep_last": 10},
    },
    "small-batch": {"train": {"max_tokens": 512}},
    "large-batch": {"train": {"max_tokens": 2048}},
    "narrow": {"model": {"d_model": 96, "n_heads": 4, "n_encoder_layers": 2,
                         "n_decoder_layers": 2, "d_ff": 384}},
    "wide": {"model": {"d_model": 256, "n_heads": 4, "n_encoder_layers": 3,
                       "n_decoder_layers": 3, "d_ff": 1024}},
    "low-rate": {"train": {"lr": 7e-4}},
    "high-rate": {"train": {"lr": 2.8e-3}},
    "low-dropout": {"model": {"dropout": 0.1}},
    "big-vocab": {"tokenizer": {"vocab_size": 8000}},
}  # fmt: skip
COMPETITOR = (
    "import torch\ntorch.set_num_threads(1)\na = torch.randn(384, 384)\nwhile True:\n    a @ a"
)
PLANNED = re.compile(r"s a step: ([\d,]+) steps of \d+ batch tokens|: ([\d,]+) steps of \d+ batch")


def tfm(*args: str, log: Path, strip: bool = True) -> str:
    """Run the tfm command line; stdout returned (stripped, unless `strip` is False: a line a
    translation, the first or last of them empty too), stderr appended to `log`."""
    with log.open("a", encoding="utf-8") as err:
        done = subprocess.run(
            [sys.executable, "-m", "tfm", *args], stdout=subprocess.PIPE, stderr=err, text=True
        )
    if done.returncode != 0:
        raise RuntimeError(f"tfm {' '.join(args)} failed ({done.returncode}); see {log}")
    return done.stdout.strip() if strip else done.stdout


def train(config: Path, log: Path, load: str | None) -> None:
    """`tfm train` on `config`; under `load`, with a competing process started (`start`) or
    stopped (`stop`) once the plan is logged."""
    competitor = None
    if load == "stop":
        competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR])
    with log.open("a", encoding="utf-8") as err:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tfm",
                "train",
                "--config",
                str(config),
                "--no-progress",
                "--overwrite",
            ],  # a run of the same name left in --runs starts again
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        while load and child.poll() is None and "recipe from the data" not in _text(log):
            time.sleep(1)
        if load == "start" and child.poll() is None:
            competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR])
        elif competitor is not None:
            competitor.kill()
        code = child.wait()
    finally:
        if competitor is not None:
            competitor.kill()
            competitor.wait()
    if code != 0:
        raise RuntimeError(f"tfm train --config {config} failed ({code}); see {log}")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def config_for(job: dict, args: argparse.Namespace, folder: Path) -> Path:
    """The run's config file: data-only, the budget, the seed, and the variant's keys."""
    src, tgt = direction(job["pair"], args)
    base = str(Path(args.data) / job["pair"])
    config: dict = {
        "run_dir": str(folder / job["name"]),
        "data": {
            "src_lang": src,
            "tgt_lang": tgt,
            **{split: {"format": "text", "path": f"{base}/{split}"} for split in SPLITS},
        },
        "train": {"max_minutes": args.minutes, "threads": args.threads, "seed": job["seed"]},
    }
    for section, keys in job["keys"].items():
        config.setdefault(section, {}).update(keys)
    if job["on"] == "mono":  # the variant whose corpora the run reads (a sweep value's: --sweep-on)
        config["data"]["monolingual"] = [{"path": str(Path(args.mono) / f"{tgt}.txt"), "lang": tgt}]
    if job["on"] == "related":
        config["data"]["related"] = [
            {"format": "text", "path": str(Path(args.data) / other / "train"),
             **dict(zip(("src_lang", "tgt_lang"), direction(other, args), strict=True)),
             **({"repeat": int(repeat)} if repeat else {})}
            for other, _, repeat in (given.partition("*")
                                     for given in related_pairs(job["pair"], args))
        ]  # fmt: skip
    path = folder / f"{job['name']}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


SPLITS = ("train", "validation", "test")


def related_pairs(pair: str, args: argparse.Namespace) -> list[str]:
    """The pairs `--related` names for `pair` (`en-fr=en-it,en-pt`); a variant that needs them
    without any is a usage error."""
    for given in args.related or []:
        main, _, others = given.partition("=")
        if main == pair:
            return [other for other in others.split(",") if other]
    raise SystemExit(f"the related variant of {pair} needs --related {pair}=PAIR,PAIR")


def direction(pair: str, args: argparse.Namespace) -> tuple[str, str]:
    """The source and target language of a run on `pair` (en-X, or X→en with --into-english)."""
    src, tgt = pair.split("-")
    return (tgt, src) if args.into_english else (src, tgt)


def run(job: dict, args: argparse.Namespace, folder: Path) -> dict:
    """Train, average as planned, evaluate as planned; the table row."""
    config = config_for(job, args, folder)
    log = folder / f"{job['name']}.log"
    started, load = time.monotonic(), os.getloadavg()[0]
    run_dir = folder / job["name"]
    try:
        train(config, log, args.load)
    except RuntimeError:  # a time limit that leaves no usable model fails the command: score it
        if not (run_dir / "best.pt").exists():
            raise
    minutes = (time.monotonic() - started) / 60  # planning and data preparation included
    load = (load + os.getloadavg()[0]) / 2
    planned = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    scored = averaged(run_dir, folder / f"{job['name']}-avg", log)
    scores = json.loads(tfm("eval", "--run", str(scored), "--json", log=log))
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").open(encoding="utf-8")]
    m, t = planned["model"], planned["train"]
    text = _text(log)
    used = re.findall(r"done: .*?([\d.]+) of [\d.]+ minutes \((\d+)%\)", text)
    at_start = ([None, *PLANNED.finditer(text)])[-1]  # the pair's run: the last planned
    src, tgt = direction(job["pair"], args)
    return {
        "pair": job["pair"],  # the data folder; the run's languages are in "direction"
        "direction": f"{src}→{tgt}",
        "variant": job["variant"],
        "seed": job["seed"],
        "plan": f"d{m['d_model']} {m['n_encoder_layers']}+{m['n_decoder_layers']} ff{m['d_ff']}, "
        f"vocab {planned['tokenizer']['vocab_size']}, batch {t['max_tokens']}, "
        f"lr {t['lr']:g}, dropout {m['dropout']}, beam {planned['decoding']['beam_size']}, "
        f"avg {t['average_last']}",
        "planned": int((at_start[1] or at_start[2]).replace(",", "")) if at_start else None,
        "steps": max(event.get("step", 0) for event in events),
        "used": int(used[-1][1]) / 100 if used else None,
        "lr_end": round([e for e in events if "lr" in e][-1]["lr"] / t["lr"], 3),
        "bleu": scores["bleu"],
        "chrf": scores["chrf"],
        "unk_rate": unk_rate(run_dir, Path(args.data) / job["pair"] / "test", job["pair"], args),
        "minutes": round(minutes, 1),
        "load": round(load, 1),
        "phases": phases(run_dir),
    }


def averaged(run_dir: Path, out: Path, log: Path) -> Path:
    """The run to decode with: its last `average_last` checkpoints averaged into `out` (`tfm
    average`), fewer where the clock stopped it early; the run itself where that leaves one."""
    planned = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    last = min(planned["train"]["average_last"], len(list((run_dir / "checkpoints").glob("*.pt"))))
    if last <= 1:
        return run_dir
    tfm("average", "--run", str(run_dir), "--last", str(last), "--out", str(out), log=log)
    return out


def phases(run_dir: Path) -> str | None:
    """What the phases of a run with monolingual text did, from its backtranslation.json; of a
    run with related pairs, its mix, from its train.log."""
    path = run_dir / "backtranslation.json"
    if not path.exists():
        mixes = re.findall(r"mix: (.+?); the main pair is (\d+%)", _text(run_dir / "train.log"))
        return f"{mixes[-1][0]}: main {mixes[-1][1]}" if mixes else None
    state = json.loads(path.read_text(encoding="utf-8"))
    plan = state["plan"]
    if plan["skipped"]:
        return "left out"
    made = state["generation"]
    return (f"reverse {state['reverse']['steps']:,} steps, {made['lines']:,} synthetic in "
            f"{made['seconds']:.0f} s, real ×{plan['repeat']}")  # fmt: skip


def tried(name: str, measure, *args) -> dict | None:
    """`measure(*args)`, a row, or None (and the error on stderr, after `name`) for a run that
    failed: the others go on."""
    try:
        return measure(*args)
    except RuntimeError as exc:
        print(f"{name}: {exc}", file=sys.stderr, flush=True)
        return None


def sweep_variants(
    pair: str, args: argparse.Namespace, folder: Path
) -> list[tuple[str, dict, str]]:
    """(name, keys, variant) for each value of `--sweep KEY=V1,…`, the value added to the keys
    of the variant `--sweep-on` names; `Nx` values scale the pair's planned value of KEY (from
    `tfm config show` of that variant's config)."""
    key, _, values = args.sweep.partition("=")
    section, name = key.split(".")
    on = args.sweep_on
    derived = None
    if any(v.endswith("x") for v in values.split(",")):
        job = {"pair": pair, "name": f"{pair}-show", "seed": 0, "keys": VARIANTS[on], "on": on}
        shown = tfm("config", "show", "--config", str(config_for(job, args, folder)),
                    log=folder / f"{pair}-show.log")  # fmt: skip
        derived = yaml.safe_load(shown)[section][name]
    variants = []
    for value in values.split(","):
        if value.endswith("x"):
            number = float(value[:-1]) * derived
            chosen: object = round(number) if isinstance(derived, int) else float(f"{number:.3g}")
        else:
            chosen = yaml.safe_load(value)
        label = f"{key}={chosen}" if on == "derived" else f"{on} {key}={chosen}"
        keys = {**VARIANTS[on], section: {**VARIANTS[on].get(section, {}), name: chosen}}
        variants.append((label, keys, on))
    return variants


def unk_rate(run_dir: Path, prefix: Path, pair: str, args: argparse.Namespace) -> float:
    """The share of `<unk>` among the test split's subword tokens, both sides, under the run's
    tokenizer."""
    tokenizer = Tokenizer.load(run_dir)
    src, tgt = direction(pair, args)
    ids = tokenizer.encode_src(_lines(prefix, src)) + tokenizer.encode_tgt(_lines(prefix, tgt))
    tokens = sum(len(row) for row in ids)
    return sum(row.count(UNK_ID) for row in ids) / max(tokens, 1)


def _lines(prefix: Path, lang: str) -> list[str]:
    return Path(f"{prefix}.{lang}").read_text(encoding="utf-8").splitlines()


def toy_pairs(folder: Path) -> Path:
    """Two tiny English–German pairs of the built-in toy corpus as text files (for --quick),
    under the language codes de and nl so that each is a pair of its own."""
    corpus = generate_toy_corpus(n_train=400, n_validation=20, n_test=20, seed=1)
    mono = folder / "mono"  # text in each language: the toy's other sentences
    mono.mkdir(parents=True, exist_ok=True)
    other = generate_toy_corpus(n_train=200, n_validation=1, n_test=1, seed=2)["train"]
    for lang, side in (("de", 1), ("nl", 1), ("en", 0)):
        (mono / f"{lang}.txt").write_text("".join(p[side] + "\n" for p in other), encoding="utf-8")
    for tgt in ("de", "nl"):
        for split, pairs in corpus.items():
            base = folder / f"en-{tgt}" / split
            base.parent.mkdir(parents=True, exist_ok=True)
            Path(f"{base}.en").write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
            Path(f"{base}.{tgt}").write_text("".join(g + "\n" for _, g in pairs), encoding="utf-8")
    return folder


def table(rows: list[dict]) -> str:
    head = (
        "| direction | variant | seed | plan | planned | steps | used | lr end | BLEU | chrF "
        "| <unk> | minutes | load | phases |\n|" + "---|" * 14
    )
    body = [
        f"| {r['direction']} | {r['variant']} | {r['seed']} | {r['plan']} | "
        f"{r['planned'] or '–'} | {r['steps']} | {_share(r['used'])} | {r['lr_end']:.2f} | "
        f"{r['bleu']:.1f} | {r['chrf']:.1f} | {r['unk_rate']:.4f} | {r['minutes']:.1f} | "
        f"{r['load']:.1f} | {r['phases'] or '–'} |"
        for r in rows
    ]
    return "\n".join([head, *body])


def _share(used: float | None) -> str:
    return "–" if used is None else f"{used:.0%}"


def jobs_for(args: argparse.Namespace, folder: Path) -> list[dict]:
    """Every run: each pair, its variants (and sweep values), each seed; a pair's runs together."""
    jobs = []
    for pair in args.pairs:
        variants = [(name, VARIANTS[name], name) for name in args.variants]
        if args.sweep:
            variants += sweep_variants(pair, args, folder)
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        for seed in seeds:
            for name, keys, on in variants:
                label = re.sub(r"[^\w.=-]", "_", name)
                job_name = f"{pair}-{label}" + (f"-s{seed}" if seeds != range(1) else "")
                jobs.append({"pair": pair, "variant": name, "seed": seed, "keys": keys,
                             "name": job_name, "on": on})  # fmt: skip
    return jobs


def add_run_options(parser: argparse.ArgumentParser, *, seeds: int, minutes: float) -> None:
    """The options of how runs are made: seeds, budget, threads, how many at a time, where."""
    parser.add_argument("--seeds", type=int, default=seeds, help="train.seed 0 … N-1 a run")
    parser.add_argument("--first-seed", type=int, default=0, help="the first of the seeds")
    parser.add_argument("--minutes", type=float, default=minutes)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=1, help="runs trained at a time")
    parser.add_argument(
        "--runs", default=None, help="folder of the runs (default: a temporary one)"
    )
    parser.add_argument("--json", default=None, help="keep the rows in this JSON file")
    parser.add_argument("--quick", action="store_true")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=os.environ.get("TFM_TATOEBA", str(DATA)))
    parser.add_argument("--mono", default=str(MONO), help="folder of LANG.txt (variant mono)")
    parser.add_argument("--into-english", action="store_true", help="train X→en")
    parser.add_argument(
        "--related",
        nargs="*",
        default=None,
        help="PAIR=PAIR,PAIR: the related pairs of a pair "
        "(variant related; with --into-english, many-to-one)",
    )
    parser.add_argument("--pairs", nargs="+", default=list(PAIRS))
    parser.add_argument("--variants", nargs="*", default=["derived"], choices=list(VARIANTS))
    parser.add_argument("--sweep", default=None, help="KEY=V1,V2,…: a variant per value")
    parser.add_argument(
        "--sweep-on", default="derived", choices=list(VARIANTS), help="the variant a sweep changes"
    )
    parser.add_argument("--load", choices=["start", "stop"], default=None)
    add_run_options(parser, seeds=1, minutes=15.0)
    args = parser.parse_args(argv)
    folder = Path(args.runs or tempfile.mkdtemp(prefix="tfm-pairs-"))
    folder.mkdir(parents=True, exist_ok=True)
    if args.quick:
        args.data, args.pairs, args.minutes = str(toy_pairs(folder / "data")), ["en-de"], 0.03
        args.mono = str(folder / "data" / "mono")
        args.related = ["en-de=en-nl"]
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        made = pool.map(lambda job: tried(job["name"], run, job, args, folder),
                        jobs_for(args, folder))  # fmt: skip
        reported(made, args, table)


def reported(made: Iterable[dict | None], args: argparse.Namespace, table) -> list[dict]:
    """The rows as they come, each printed (a table line) and all kept in `--json` after each
    (None: a run that failed, said on stderr); then the whole table."""
    rows: list[dict] = []
    for row in made:
        if row is None:
            continue
        rows.append(row)
        print(table([row]).splitlines()[-1], flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(f"\nbudget: {args.minutes:g} minutes on {args.threads} thread(s) a run\n")
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()

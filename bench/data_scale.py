"""Big corpora on one machine: memory and time of `tfm train` and `tfm data check` against the
number of training pairs, on synthetic corpora this script writes itself.

For each size it runs, as separate processes (memory is read from /proc while they run):
    cold   `tfm train` with an empty data cache: reading, BPE, encoding, then training
    warm   `tfm train --overwrite` again: the cache is mapped, nothing is prepared
    check  `tfm data check` with an empty data cache
and reports the time to the first logged training step (step 10) and the peak RSS up to it,
cold and warm, with the peak of its anonymous part (RssAnon: RSS less mapped file pages, which
the kernel can drop and read again); the preparation's phases (from the entry's meta.json); the
RSS growth from step 10 to the last; the check's time and peaks; the cache's size on disk. The
`tree` peaks add to the process's own RSS that of the worker processes that encode a corpus of
over 100,000 pairs, polled together. A
least-squares line through the sizes gives the growth per million pairs and the figures at 4.5M
pairs (WMT14 en-de).

    PYTHONPATH=src OMP_NUM_THREADS=2 python bench/data_scale.py                 # 30k, 300k, 1M
    PYTHONPATH=src OMP_NUM_THREADS=2 python bench/data_scale.py --sizes 30000 300000 1000000 3000000
    PYTHONPATH=src python bench/data_scale.py --quick                           # a minute or two

The corpus: two made-up languages of 50,000 words each (random letters, 2-11 long), drawn by a
Zipf law (s = 1.1); sentence lengths log-normal around 20 words, at most 120; the target is the
source word by word through a fixed dictionary, in reverse order. About 170 bytes a sentence,
close to news text. The model is tiny (d_model 64, one layer each side): the steps are not what
is measured.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TARGET = 4_500_000  # pairs of WMT14 en-de, where the fit is read
FULL_SIZES = (30_000, 300_000, 1_000_000)
QUICK_SIZES = (500, 1_500)


def _lexicon(rng: np.random.Generator, letters: np.ndarray, words: int = 50_000) -> np.ndarray:
    """`words` words of 2-11 random letters, all letters drawn in one call: the same words as
    drawing each word's letters in turn (`rng.choice(letters, k)`), several times faster."""
    lengths = rng.integers(2, 12, words)
    chars = letters[rng.integers(0, len(letters), int(lengths.sum()))]
    ends = np.cumsum(lengths)
    return np.array(["".join(chars[a:b]) for a, b in zip(ends - lengths, ends, strict=True)])


def write_corpus(prefix: Path, n: int, *, seed: int) -> None:
    """`n` synthetic pairs as `{prefix}.en` / `{prefix}.de` (see the module docstring)."""
    if Path(f"{prefix}.done").exists():
        return
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzäöüß"))
    lexicons = [_lexicon(rng, letters) for _ in range(2)]
    weights = 1.0 / np.arange(1, 50_001) ** 1.1
    weights /= weights.sum()
    with open(f"{prefix}.en", "w") as src, open(f"{prefix}.de", "w") as tgt:
        for start in range(0, n, 100_000):  # in blocks: memory stays small at any size
            count = min(100_000, n - start)
            lengths = np.clip(rng.lognormal(2.9, 0.45, count).astype(int), 1, 120)
            words = rng.choice(50_000, size=int(lengths.sum()), p=weights)
            ends = np.cumsum(lengths)
            for a, b in zip(ends - lengths, ends, strict=True):
                src.write(" ".join(lexicons[0][words[a:b]]) + " .\n")
                tgt.write(" ".join(lexicons[1][words[a:b][::-1]]) + " .\n")
    Path(f"{prefix}.done").touch()


def config_text(work: Path, n: int, *, quick: bool) -> str:
    corpus = work / f"corpus-{n}"
    return json.dumps(  # JSON is YAML
        {
            "run_dir": str(work / "runs" / str(n)),
            "data": {
                "src_lang": "en",
                "tgt_lang": "de",
                "train": {"format": "text", "path": str(corpus / "train")},
                "validation": {"format": "text", "path": str(corpus / "valid")},
                "test": {"format": "text", "path": str(corpus / "valid")},
                "cache_dir": str(work / "cache"),
            },
            "tokenizer": {"vocab_size": 1000 if quick else 8000},
            "model": {
                "d_model": 64,
                "n_heads": 2,
                "n_encoder_layers": 1,
                "n_decoder_layers": 1,
                "d_ff": 128,
                "dropout": 0.1,
            },
            # Every key set, so that no recipe is planned: the data is prepared where training
            # asks for it, and "data ready in" times preparing it.
            "train": {
                "max_steps": 6 if quick else 50,
                "log_every": 3 if quick else 10,
                "threads": 1 if quick else None,  # quick: one thread, as in the test suite
                "validate_every": 1_000_000,
                "max_epochs": None,
                "max_tokens": 1024 if quick else 4096,
                "lr": 1e-3,
                "warmup_steps": 10,
                "schedule": "inverse_sqrt",
                "decay_steps": None,
                "label_smoothing": 0.1,
                "patience": None,
                "checkpoint_every": None,
                "keep_last": 3,
                "average_last": 1,
                "early_stopping_metric": "bleu",
            },
            "decoding": {"max_len_a": 0.0, "max_len_b": 2, "strategy": "greedy", "beam_size": 5},
        }
    )


def watch(command: list[str], metrics: Path | None, logs: Path) -> dict:
    """Run `command`; poll its RSS, its peak RSS (VmHWM) and `metrics` (training's JSON lines),
    and take its CPU time from the kernel when it ends. Its output goes to `logs`.{out,err}."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out, err = Path(f"{logs}.out"), Path(f"{logs}.err")
    start = time.perf_counter()
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env, text=True)
    status = Path(f"/proc/{process.pid}/status")
    peak, anon, tree, first_step, rss_at = 0.0, 0.0, 0.0, None, {}
    while True:
        memory = _memory(status)
        peak, anon = max(peak, memory.get("VmHWM", 0.0)), max(anon, memory.get("RssAnon", 0.0))
        workers = [_memory(Path(f"/proc/{pid}/status")) for pid in _children(process.pid)]
        tree = max(tree, memory.get("VmRSS", 0.0) + sum(w.get("VmRSS", 0.0) for w in workers))
        if metrics is not None and metrics.exists():
            for event in map(json.loads, metrics.read_text().splitlines()):
                step = event["step"]
                if "train_loss" in event and step not in rss_at:
                    rss_at[step] = memory.get("VmRSS", 0.0)
                    if first_step is None:
                        first_step = {"s": time.perf_counter() - start, "peak_mib": peak,
                                      "anon_mib": anon, "tree_mib": max(peak, tree)}  # fmt: skip
        pid, code, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.05)
    process.returncode = os.waitstatus_to_exitcode(code)
    if process.returncode:
        raise RuntimeError(f"{' '.join(command)} failed ({code}):\n{err.read_text()[-3000:]}")
    return {
        "s": time.perf_counter() - start,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mib": max(peak, usage.ru_maxrss / 1024),
        "anon_mib": anon,
        "tree_mib": max(peak, tree),
        "first_step": first_step,
        "rss_at": rss_at,
        "stdout": out.read_text(),
        "stderr": err.read_text(),
    }


def _children(pid: int) -> list[str]:
    """The processes `pid` started (the encoding's worker processes): Linux lists them."""
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (FileNotFoundError, ProcessLookupError):
        return []


def _memory(status: Path) -> dict[str, float]:
    """VmRSS, VmHWM (its peak) and RssAnon (what is not a mapped file: memory the kernel cannot
    take back by dropping pages) of a running process in MiB (empty once it has exited)."""
    try:
        lines = status.read_text().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        return {}
    fields = (line.split() for line in lines if line.startswith(("VmRSS", "VmHWM", "RssAnon")))
    return {name.rstrip(":"): int(kib) / 1024 for name, kib, *_ in fields}


def measure(work: Path, n: int, *, quick: bool) -> dict:
    corpus = work / f"corpus-{n}"
    corpus.mkdir(parents=True, exist_ok=True)
    write_corpus(corpus / "train", n, seed=0)
    write_corpus(corpus / "valid", 20 if quick else 200, seed=1)
    config = work / f"config-{n}.yaml"
    config.write_text(config_text(work, n, quick=quick))
    tfm = [sys.executable, "-m", "tfm"]
    train = [*tfm, "train", "--config", str(config), "--overwrite", "--no-progress"]
    metrics = work / "runs" / str(n) / "metrics.jsonl"
    shutil.rmtree(work / "cache", ignore_errors=True)
    shutil.rmtree(metrics.parent, ignore_errors=True)  # so that only the new run's steps are read
    cold = watch(train, metrics, work / f"cold-{n}")
    (entry,) = (work / "cache").glob("*/meta.json")
    meta = json.loads(entry.read_text())
    shutil.rmtree(metrics.parent)
    warm = watch(train, metrics, work / f"warm-{n}")
    shutil.rmtree(work / "cache", ignore_errors=True)
    check = watch(
        [*tfm, "data", "check", "--config", str(config), "--json"], None, work / f"check-{n}"
    )
    steps = sorted(warm["rss_at"])
    return {
        "pairs": n,
        "text_mb": sum(f.stat().st_size for f in corpus.glob("train.??")) / 1e6,
        "prepare_s": sum(meta["seconds"].values()),
        "prepare_cpu_s": sum(meta["cpu_seconds"].values()),
        "phases_s": meta["seconds"],
        "phases_cpu_s": meta["cpu_seconds"],
        "cold_first_step_s": cold["first_step"]["s"],
        "cold_peak_mib": cold["first_step"]["peak_mib"],
        "warm_first_step_s": warm["first_step"]["s"],
        "warm_peak_mib": warm["first_step"]["peak_mib"],
        "cold_anon_mib": cold["first_step"]["anon_mib"],
        "cold_tree_mib": cold["first_step"]["tree_mib"],
        "warm_anon_mib": warm["first_step"]["anon_mib"],
        "cold_data_s": _data_seconds(cold["stderr"]),
        "warm_data_s": _data_seconds(warm["stderr"]),
        "cold_wrote_cache": "prepared data written to" in cold["stderr"],
        "warm_wrote_cache": "prepared data written to" in warm["stderr"],
        "growth_mib": warm["rss_at"][steps[-1]] - warm["rss_at"][steps[0]],
        "growth_steps": [steps[0], steps[-1]],
        "check_s": check["s"],
        "check_cpu_s": check["cpu_s"],
        "check_peak_mib": check["peak_mib"],
        "check_anon_mib": check["anon_mib"],
        "check_tree_mib": check["tree_mib"],
        "check_pairs": json.loads(check["stdout"])["splits"]["train"]["pairs"],
        "cache_mb": sum(f.stat().st_size for f in entry.parent.iterdir()) / 1e6,
    }


def _data_seconds(log: str) -> float:
    """What training logged as the time its data took (cache or preparation, and validation)."""
    (line,) = [line for line in log.splitlines() if line.startswith("data ready in ")]
    return float(line.split()[3])


def fit(rows: list[dict], key: str) -> dict:
    """Least-squares line `key` = a + b · pairs; b per million pairs, and the value at TARGET."""
    x = np.array([row["pairs"] for row in rows], dtype=float)
    y = np.array([row[key] for row in rows], dtype=float)
    b, a = np.polyfit(x, y, 1)
    return {"per_million": b * 1e6, "at_zero": a, "at_target": a + b * TARGET}


FITTED = (
    "cold_data_s",
    "warm_data_s",
    "cold_peak_mib",
    "warm_peak_mib",
    "check_peak_mib",
    "cold_anon_mib",
    "warm_anon_mib",
    "check_anon_mib",
    "cold_tree_mib",
    "check_tree_mib",
    "prepare_s",
    "prepare_cpu_s",
    "cold_first_step_s",
    "warm_first_step_s",
    "check_s",
    "check_cpu_s",
    "cache_mb",
)


def report(rows: list[dict]) -> dict:
    return {
        "rows": rows,
        "fit": {key: fit(rows, key) for key in FITTED},
        "target": TARGET,
        "load": os.getloadavg(),
        "threads": os.environ.get("OMP_NUM_THREADS"),
    }


COLUMNS = (  # the table's columns and their formats
    ("pairs", "{:,}"),
    ("text_mb", "{:.0f}"),
    ("prepare_s", "{:.1f}"),
    ("prepare_cpu_s", "{:.1f}"),
    ("cold_first_step_s", "{:.1f}"),
    ("warm_first_step_s", "{:.1f}"),
    ("cold_peak_mib", "{:.0f}"),
    ("warm_peak_mib", "{:.0f}"),
    ("cold_anon_mib", "{:.0f}"),
    ("cold_tree_mib", "{:.0f}"),
    ("warm_anon_mib", "{:.0f}"),
    ("growth_mib", "{:+.0f}"),
    ("check_s", "{:.1f}"),
    ("check_cpu_s", "{:.1f}"),
    ("check_peak_mib", "{:.0f}"),
    ("check_anon_mib", "{:.0f}"),
    ("check_tree_mib", "{:.0f}"),
    ("cache_mb", "{:.0f}"),
)


def format_report(result: dict) -> str:
    cells = [[form.format(row[name]) for name, form in COLUMNS] for row in result["rows"]]
    widths = [max(len(name), *(len(r[i]) for r in cells)) for i, (name, _) in enumerate(COLUMNS)]
    lines = ["  ".join(f"{name:>{w}}" for (name, _), w in zip(COLUMNS, widths, strict=True))]
    for row, values in zip(result["rows"], cells, strict=True):
        lines.append("  ".join(f"{v:>{w}}" for v, w in zip(values, widths, strict=True)))
        phases = ", ".join(
            f"{k} {v:.1f} s ({row['phases_cpu_s'][k]:.1f} s CPU)"
            for k, v in row["phases_s"].items()
        )
        ratio = row["warm_data_s"] / row["cold_data_s"]
        lines.append(
            f"    {row['pairs']:,} pairs: preparation {phases}; data {row['cold_data_s']:.1f} s "
            f"cold, {row['warm_data_s']:.1f} s warm ({ratio:.1%})"
        )
    lines.append(f"fit (a + b · pairs), at {result['target']:,} pairs:")
    for key, line in result["fit"].items():
        lines.append(
            f"  {key:>17}: {line['per_million']:+.1f} per 1M pairs, "
            f"{line['at_target']:.1f} at {result['target'] / 1e6:.1f}M"
        )
    lines.append(f"load average {result['load'][0]:.1f}, OMP_NUM_THREADS={result['threads']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", help="pairs per corpus")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path(tempfile.gettempdir()) / "tfm-data-scale",
        help="folder for corpora (kept and reused), runs and the cache",
    )
    parser.add_argument("--quick", action="store_true", help="tiny corpora: a minute or two")
    parser.add_argument(
        "--json", type=Path, help="also write the report here (the rows so far after each size)"
    )
    parser.add_argument(
        "--rows",
        type=Path,
        help="a report written before (--json): its sizes are not measured again",
    )
    args = parser.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    rows = json.loads(args.rows.read_text())["rows"] if args.rows else []
    for n in sizes:
        if any(row["pairs"] == n for row in rows):
            continue
        rows.append(measure(args.work, n, quick=args.quick))
        rows.sort(key=lambda row: row["pairs"])
        print(f"{n:,} pairs measured", file=sys.stderr, flush=True)
        if args.json:  # a long run that is cut short keeps what it measured
            args.json.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    result = report(rows)
    print(format_report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()

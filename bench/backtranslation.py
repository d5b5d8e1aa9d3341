"""Back-translation's costs: generating synthetic sources against `tfm translate --file`, and
preparing monolingual text against its size.

    python bench/backtranslation.py --run runs/toy                  # speed, 20,000 lines
    python bench/backtranslation.py --run RUN --lines 50000 --rounds 3
    python bench/backtranslation.py --prepare 100000 1000000        # memory, fresh processes
    python bench/backtranslation.py --quick                         # a tiny run, seconds

Speed: one Translator of the run (greedy, one thread unless `--threads`) decodes the same unseen
toy sentences two ways, interleaved round by round: the path of `tfm translate --file` (the file
read by `translation_input`, decoded by `translate_batches`, the translations written to a file)
and the generation of a run with `data.monolingual` (the lines from the prepared monolingual
text, decoded by `generate_synthetic` into a TSV file, flushed batch by batch). The report gives
each round's sentences a second and the median ratio of generation to translate; the goal is at
least 0.8.

Memory: for each size, a file of that many toy sentences is prepared as a run's monolingual
text (`prepared_monolingual`) in a fresh process, whose peak resident set the kernel reports
when it exits; the smallest size is the baseline. Preparing streams the file, so what grows is
the offsets array (8 bytes a line), not a list of the lines.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _multi30k import machine  # noqa: E402
from cold_start import quick_run  # noqa: E402

from tfm.api import (  # noqa: E402
    DecodeRequest,
    generate_synthetic,
    generate_toy_corpus,
    load_config,
    open_translator,
    prepared_monolingual,
    translate_batches,
    translation_input,
)

SRC = Path(__file__).resolve().parents[1] / "src"
SEED = 20_252  # not the toy corpus's default seed: sentences the run has not seen
PREPARE = """
import sys
from tfm.api import load_config, prepared_monolingual
text = prepared_monolingual(load_config(sys.argv[1]), progress=False)
print(len(text))
"""


def write_text(path: Path, n: int, *, lang: int = 1) -> Path:
    """`n` toy sentences (German by default) not in any default toy corpus, one a line."""
    written, seed = 0, SEED
    with path.open("w", encoding="utf-8") as file:
        while written < n:
            count = min(n - written, 200_000)
            pairs = generate_toy_corpus(n_train=count, n_validation=0, n_test=0, seed=seed)
            file.write("".join(pair[lang] + "\n" for pair in pairs["train"]))
            written, seed = written + count, seed + 1
    return path


def mono_config(folder: Path, text: Path, run: Path | None = None) -> Path:
    """A config of the toy pair with `text` as its monolingual text, its cache in `folder`."""
    config = {"run_dir": str(run or folder / "run"),
              "data": {"monolingual": [{"path": str(text), "lang": "de"}],
                       "cache_dir": str(folder / "cache")}}  # fmt: skip
    path = folder / "mono.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def speed(run: Path, lines: int, rounds: int, threads: int, work: Path) -> list[dict]:
    text_file = write_text(work / "mono.de", lines)
    text = prepared_monolingual(load_config(mono_config(work, text_file)), progress=False)
    request = DecodeRequest(run=run, search={"strategy": "greedy"}, threads=threads)
    translator = open_translator(request)
    index = np.arange(len(text))
    found = []
    for turn in range(rounds):
        row: dict = {"round": turn + 1}
        out = work / "translated.txt"
        started = time.perf_counter()
        with out.open("w", encoding="utf-8") as file:
            batches = translation_input([], text_file, io.StringIO())
            for translations in translate_batches(translator, batches):
                file.write("".join(t + "\n" for t in translations))
        row["translate"] = lines / (time.perf_counter() - started)
        tsv = work / "synthetic.tsv"
        tsv.unlink(missing_ok=True)
        started = time.perf_counter()
        made = generate_synthetic(translator, text.lines(), index, tsv, progress=False)
        row["generate"] = made.lines / (time.perf_counter() - started)
        same = [line.split("\t")[0] for line in tsv.read_text(encoding="utf-8").splitlines()]
        if same != out.read_text(encoding="utf-8").splitlines():
            sys.exit("generation and translate --file gave different translations")
        found.append(row)
    return found


def memory(sizes: Sequence[int], work: Path) -> list[dict]:
    rows = []
    for n in sizes:
        folder = work / f"prepare-{n}"
        folder.mkdir()
        config = mono_config(folder, write_text(folder / "mono.de", n))
        env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-c", PREPARE, str(config)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        _, status, usage = os.wait4(child.pid, 0)
        out = child.stdout.read().decode() if child.stdout else ""
        if os.waitstatus_to_exitcode(status) != 0 or int(out or 0) != n:
            sys.exit(f"preparing {n:,} lines failed: {child.stderr.read() if child.stderr else ''}")
        rows.append({"lines": n, "peak_mib": usage.ru_maxrss / 1024,
                     "seconds": round(time.perf_counter() - started, 1)})  # fmt: skip
    return rows


def report(speeds: list[dict], memories: list[dict]) -> str:
    lines = [f"machine: {machine()}"]
    for row in speeds:
        lines.append(f"round {row['round']}: translate --file {row['translate']:.0f}, "
                     f"generation {row['generate']:.0f} sentences/s")  # fmt: skip
    if speeds:
        ratio = statistics.median(row["generate"] / row["translate"] for row in speeds)
        lines.append(f"generation / translate --file: {ratio:.2f}x (median of {len(speeds)})")
    for row in memories:
        base = memories[0]["peak_mib"]
        lines.append(f"prepare {row['lines']:>9,} lines: peak {row['peak_mib']:.0f} MiB, "
                     f"{row['peak_mib'] / base:.2f}x of {memories[0]['lines']:,} lines, "
                     f"{row['seconds']:.1f} s")  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> tuple[list[dict], list[dict]]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path, help="a trained run (default: runs/toy)")
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prepare", type=int, nargs="*", default=[], help="sizes, smallest first")
    parser.add_argument("--quick", action="store_true", help="a tiny run; 300 lines; 2,000/20,000")
    args = parser.parse_args(argv)
    if args.quick:
        args.lines, args.rounds, args.prepare = 300, 2, [2_000, 20_000]
    with tempfile.TemporaryDirectory(prefix="tfm-bench-") as tmp:
        work = Path(tmp)
        run = quick_run(work) if args.quick else (args.run or Path("runs/toy"))
        speeds = []
        if args.quick or args.run or not args.prepare:
            if not (run / "config.yaml").is_file():
                sys.exit(f"{run}: not a trained run; train one or give --run DIR, or --quick")
            speeds = speed(run, args.lines, args.rounds, args.threads, work)
        memories = memory(sorted(args.prepare), work)
    print(report(speeds, memories))
    return speeds, memories


if __name__ == "__main__":
    main()

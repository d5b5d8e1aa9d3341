"""Memory of `tfm translate --file` and `tfm eval --src --ref` against the number of input lines.

    python bench/decode_memory.py --run runs/toy                     # 5,000 and 50,000 lines
    python bench/decode_memory.py --run runs/toy --sizes 5000 20000 50000
    python bench/decode_memory.py --quick                            # tiny run, 200 and 2,000

For each size it writes that many toy sentence pairs the run has not seen (a seed of their own,
unlike the run's corpus), then runs, as fresh processes, `tfm translate --file` and `tfm eval
--src --ref --json`, and reads each one's peak resident set from the kernel when it exits. The
small size is the baseline: the report gives each command's peak at every size, its ratio to the
baseline's peak and the growth per 1,000 lines.

`translate --file` decodes the file 1,000 lines at a time; `eval` encodes and decodes 5,000 at a
time and sums sacreBLEU's sentence statistics chunk by chunk. Flat memory is a ratio near 1:
what grows with the input is its text and the hypotheses' text, not batches, tensors or ids.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _multi30k import machine  # noqa: E402
from cold_start import quick_run  # noqa: E402

from tfm.api import generate_toy_corpus  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"
FULL_SIZES = (5_000, 50_000)
QUICK_SIZES = (200, 2_000)
SEED = 20_251  # not the toy corpus's default seed: sentences the run has not seen


def write_lines(folder: Path, n: int) -> tuple[Path, Path]:
    """`n` toy pairs as folder/{n}.en and folder/{n}.de, one sentence a line."""
    pairs = generate_toy_corpus(n_train=n, n_validation=0, n_test=0, seed=SEED)["train"]
    src, ref = folder / f"{n}.en", folder / f"{n}.de"
    src.write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    ref.write_text("".join(de + "\n" for _, de in pairs), encoding="utf-8")
    return src, ref


def measure(run: Path, sizes: Sequence[int], work: Path) -> list[dict]:
    tfm = [sys.executable, "-m", "tfm"]
    rows = []
    for n in sizes:
        src, ref = write_lines(work, n)
        translate = [*tfm, "translate", "--run", str(run), "--file", str(src)]
        evaluate = [*tfm, "eval", "--run", str(run), "--src", str(src), "--ref", str(ref), "--json"]
        row: dict = {"lines": n}
        for name, command in (("translate", translate), ("eval", evaluate)):
            row[name] = run_child(command, work / f"{name}-{n}.out")
        translations = (work / f"translate-{n}.out").read_text(encoding="utf-8").splitlines()
        if len(translations) != n:
            sys.exit(f"tfm translate printed {len(translations)} lines for {n}")
        scores = json.loads((work / f"eval-{n}.out").read_text(encoding="utf-8"))
        row["eval"]["bleu"] = scores["bleu"]
        rows.append(row)
    return rows


def run_child(command: Sequence[str], stdout: Path) -> dict:
    """Run `command` with its stdout in `stdout`; its peak RSS (MiB, from the kernel's rusage
    of that process alone) and wall seconds."""
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": str(SRC) + (os.pathsep + path if path else "")}
    started = time.perf_counter()
    with stdout.open("wb") as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        sys.exit(f"{' '.join(command[3:5])} … failed ({process.returncode}):\n{stderr}")
    return {"peak_mib": usage.ru_maxrss / 1024, "seconds": round(seconds, 2)}


def report(rows: list[dict]) -> str:
    base = rows[0]
    lines = [f"machine: {machine()}"]
    for name in ("translate", "eval"):
        for row in rows:
            mib, first = row[name]["peak_mib"], base[name]["peak_mib"]
            text = f"{name:9} {row['lines']:>7,} lines: peak {mib:6.0f} MiB"
            if row is not base:
                per_k = (mib - first) / ((row["lines"] - base["lines"]) / 1000)
                text += f", {mib / first:.3f}x of {base['lines']:,} lines"
                text += f", {per_k:+.2f} MiB/1k lines"
            lines.append(text + f" ({row[name]['seconds']:.1f} s)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path, help="a trained run directory (default: runs/toy)")
    parser.add_argument("--sizes", type=int, nargs="+", help="lines, smallest first (5000 50000)")
    parser.add_argument("--quick", action="store_true", help="a tiny run trained here, 200/2000")
    args = parser.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    with tempfile.TemporaryDirectory(prefix="tfm-bench-") as tmp:
        run = quick_run(Path(tmp)) if args.quick else (args.run or Path("runs/toy"))
        if not (run / "config.yaml").is_file():
            sys.exit(f"{run}: not a trained run; train one or give --run DIR, or --quick")
        rows = measure(run, sorted(sizes), Path(tmp))
    print(report(rows))
    return rows


if __name__ == "__main__":
    main()

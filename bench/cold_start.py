"""Cold start of `tfm translate "one sentence"`: a whole new process, against `import torch`.

    python bench/cold_start.py --run runs/toy --repeats 10   # a trained run, 10 pairs of timings
    python bench/cold_start.py --quick                       # a run trained here, 2 pairs (tests)

A script that translates one sentence at a time pays for a whole process each time. Each pair
times, one right after the other, a fresh `python -m tfm translate --run RUN "the small dog sees
the big cat"` and a fresh `python -c "import torch"`, from their start to their exit (Python's
own start included). torch's import is the floor that translation cannot go below; the ratio of
each pair says what tfm adds (Python's start, typer, pydantic and the config schema, tokenizers,
opening the run, one sentence of decoding), and medians of the pairs' seconds and ratios are
reported, with quartiles. The translate processes also report which heavy modules they imported
that translation never needs (`datasets` with pandas and pyarrow, matplotlib, sacreBLEU): there
should be none.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _multi30k import QUICK_TRAINING, machine, summary  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"
SENTENCE = "the small dog sees the big cat"
UNNEEDED = ("datasets", "pandas", "pyarrow", "matplotlib", "sacrebleu")
# Runs translate in the child, then says which of UNNEEDED it imported (on stderr, last line).
TRANSLATE = (
    "import sys\n"
    "from tfm.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    loaded = [m for m in {unneeded!r} if m in sys.modules]\n"
    "    print('imported:', ' '.join(loaded) or 'none', file=sys.stderr)\n"
)


def timed(command: Sequence[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Seconds from start to exit of `command`, and what it did."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=_environment())
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:4])} … failed ({done.returncode}):\n{done.stderr}")
    return seconds, done


def _environment() -> dict[str, str]:
    """tfm from this checkout; the caller's thread settings, whatever they are."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": str(SRC) + (os.pathsep + path if path else "")}


def measure(run: Path, repeats: int, sentence: str = SENTENCE) -> dict:
    """`repeats` interleaved pairs of (translate, import torch) process timings."""
    code = TRANSLATE.format(unneeded=UNNEEDED)
    translate = [sys.executable, "-c", code, "translate", "--run", str(run), sentence]
    torch_only = [sys.executable, "-c", "import torch"]
    timed(translate)  # once first, so that every timed start finds the files in the page cache
    pairs, imported, output = [], set(), ""
    for _ in range(repeats):
        seconds, done = timed(translate)
        floor, _ = timed(torch_only)
        pairs.append((seconds, floor))
        imported.update(done.stderr.strip().splitlines()[-1].removeprefix("imported: ").split())
        output = done.stdout.strip()
    imported.discard("none")
    return {"pairs": pairs, "imported": sorted(imported), "translation": output}


def report(result: dict, repeats: int) -> str:
    translate = [seconds for seconds, _ in result["pairs"]]
    floor = [seconds for _, seconds in result["pairs"]]
    ratios = [seconds / base for seconds, base in result["pairs"]]
    return "\n".join(
        [
            f"machine: {machine()}",
            f'tfm translate "{SENTENCE}": {_seconds(translate)}',
            f"python -c 'import torch': {_seconds(floor)}",
            f"translate / import torch: {summary(ratios)}",
            f"tfm adds: median {statistics.median(t - f for t, f in result['pairs']):.2f} s",
            f"unneeded modules imported: {', '.join(result['imported']) or 'none'}",
            f"translation: {result['translation']}",
            f"({repeats} pairs of fresh processes, interleaved)",
        ]
    )


def _seconds(values: Sequence[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.2f} s"
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"median {median:.2f} s ({q1:.2f}-{q3:.2f})"


def quick_run(directory: Path) -> Path:
    """A tiny toy run trained in `directory` (seconds), without being remembered as the last run."""
    from tfm.api import load_config, train

    cwd = os.getcwd()
    os.chdir(directory)
    try:
        config = load_config(
            None, [*QUICK_TRAINING, "train.max_steps=5", f"run_dir={directory}/run"]
        )
        return Path(train(config, progress_bar=False).run_dir)
    finally:
        os.chdir(cwd)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path, help="a trained run directory (default: runs/toy)")
    parser.add_argument("--repeats", type=int, default=10, help="pairs of timings (default 10)")
    parser.add_argument("--quick", action="store_true", help="a tiny run trained here, 2 pairs")
    args = parser.parse_args(argv)
    repeats = 2 if args.quick else args.repeats
    with tempfile.TemporaryDirectory(prefix="tfm-bench-") as tmp:
        run = quick_run(Path(tmp)) if args.quick else (args.run or Path("runs/toy"))
        if not (run / "config.yaml").is_file():
            sys.exit(
                f"{run}: not a trained run; train one (tfm train) or give --run DIR, or --quick"
            )
        print(report(measure(run, repeats), repeats))


if __name__ == "__main__":
    main()

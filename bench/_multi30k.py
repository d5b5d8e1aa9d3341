"""Shared set-up for the benchmarks that train or decode with tfm's own code (`decode_speed.py`,
`train_speed.py`, `cuda_precision.py`, `multi30k.py`): where the Multi30k copy
is, the German-English config, the tiny toy config of every `--quick` run, a real training
`Session` in a throw-away run directory, a trained run's test split (or a toy run's, trained for
the serve and export benchmarks' quick modes), memory readings and the median of paired ratios.
Not a benchmark itself.

The Multi30k copy is read in place from `--data DIR`, else `$TFM_MULTI30K`, else
`../shared/data/multi30k` beside the checkout; a `--quick` run needs none: it trains on the built-in
toy corpus.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tfm.api import Config, load_config  # noqa: E402

if TYPE_CHECKING:
    from tfm.api import DataParallel, Session

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "multi30k"
MODEL = [
    "model.d_model=256",
    "model.n_heads=8",
    "model.n_encoder_layers=3",
    "model.n_decoder_layers=3",
    "model.d_ff=1024",
    "train.max_tokens=4096",
]
# --quick: a few hundred toy pairs and a model of a few thousand parameters (seconds on a CPU)
QUICK = [
    "data.src_lang=en",
    "data.tgt_lang=de",
    "data.toy.n_train=300",
    "data.toy.n_validation=24",
    "data.toy.n_test=24",
    "tokenizer.vocab_size=200",
    "model.d_model=32",
    "model.n_heads=2",
    "model.n_encoder_layers=1",
    "model.n_decoder_layers=1",
    "model.d_ff=64",
    "train.max_tokens=600",
]

# --quick runs that train a model to score: enough steps for the tiny model to output something
QUICK_TRAINING = [
    *QUICK,
    "train.max_steps=60",
    "train.validate_every=60",
    "train.warmup_steps=10",
    "train.lr=0.01",
]


def add_data_options(parser: argparse.ArgumentParser) -> None:
    """--data DIR and --quick, as every script that reads Multi30k has them."""
    parser.add_argument(
        "--data",
        type=Path,
        help="the Multi30k folder (train.de, val.en, test2016.de, …); default: $TFM_MULTI30K, "
        f"else ../shared/data/multi30k beside the checkout ({DEFAULT_DATA})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a few steps of a tiny model on the built-in toy corpus (seconds; no Multi30k needed)",
    )


def data_dir(given: Path | None = None) -> Path:
    """The Multi30k folder: `given` (--data), else $TFM_MULTI30K, else the default beside the
    checkout (see `require_data` for one that must be there), made absolute: the benches move
    into a temporary directory while they train."""
    return (given or Path(os.environ.get("TFM_MULTI30K") or DEFAULT_DATA)).absolute()


def require_data(given: Path | None = None) -> Path:
    """`data_dir(given)`, or exit with a one-line message when it is not a folder."""
    folder = data_dir(given)
    if not folder.is_dir():
        sys.exit(
            f"Multi30k not found at {folder}; give --data DIR or set TFM_MULTI30K (or --quick)"
        )
    return folder


def multi30k_data(folder: Path, src: str = "de", tgt: str = "en") -> list[str]:
    """Config overrides that read the three splits of the Multi30k copy in `folder`."""
    sets = [f"data.src_lang={src}", f"data.tgt_lang={tgt}"]
    for split, name in (("train", "train"), ("validation", "val"), ("test", "test2016")):
        sets.append(f"data.{split}={{format: text, path: {folder / name}}}")
    return sets


def bench_config(run_dir: str, args: argparse.Namespace, overrides: Sequence[str] = ()) -> Config:
    """The benchmarks' config, writing to `run_dir`: with `args.quick` the toy corpus and a tiny
    model, else Multi30k de-en (from `args.data`) and the d_model 256, 3 + 3-layer model."""
    base = QUICK if args.quick else [*multi30k_data(require_data(args.data)), *MODEL]
    return load_config(None, [*base, "train.device=cpu", f"run_dir={run_dir}", *overrides])


@contextlib.contextmanager
def training_session(
    args: argparse.Namespace, overrides: Sequence[str] = ()
) -> Iterator[tuple[Session, DataParallel]]:
    """tfm's own training session (tokenizer, model, AdamW, epoch plan) of `bench_config` and its
    one-process DataParallel, in a temporary run directory. The working directory moves there
    too, so the run is not remembered as the user's last run."""
    from tfm.api import DataParallel, Replicas, StopFlag, open_session

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="tfm-bench-") as tmp:
        os.chdir(tmp)
        try:
            config = bench_config(str(Path(tmp) / "run"), args, overrides)
            session = open_session(config, resume=False, overwrite=True)
            yield session, DataParallel(Replicas(), session, StopFlag())
        finally:
            os.chdir(cwd)


def run_and_test_split(
    run: Path | None, scratch: Path, overrides: Sequence[str]
) -> tuple[Path, list[str], list[str]]:
    """`run`, else a toy run trained in `scratch`/run with `overrides`; and the sources and
    references of its own test split."""
    from tfm.api import load_texts, train

    if run is None:
        run = scratch / "run"
        train(load_config(None, [f"run_dir={run}", *overrides]), progress_bar=False)
    src, tgt, _ = load_texts(load_config(run / "config.yaml", stored=True).data, "test")
    return run, src, tgt


def rss_mib() -> tuple[float, float]:
    """(current VmRSS, peak ru_maxrss) of this process in MiB (Linux)."""
    current = 0.0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) / 1024
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summary(ratios: Sequence[float]) -> str:
    """Median of paired ratios with its quartiles, e.g. '5.31x (4.90-5.62, n=10)'."""
    if len(ratios) < 2:
        return f"{ratios[0]:.2f}x (n=1)" if ratios else "n/a"
    q1, median, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    return f"{median:.2f}x ({q1:.2f}-{q3:.2f}, n={len(ratios)})"


def machine() -> str:
    """CPU model, cores, GPU if any, load and torch version, for the record."""
    import torch

    model = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        names = [line.split(":", 1)[1].strip() for line in info if line.startswith("model name")]
        model = names[0] if names else model
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    gpu = f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return (
        f"{model}, {os.cpu_count()} CPUs{gpu}, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), load {load}"
    )

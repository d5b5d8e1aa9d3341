"""Shared set-up for the Multi30k benchmarks (`decode_speed.py`, `train_speed.py`): the issue's
German-English config, a real training `Session` in a throw-away run directory, memory readings and
the median of paired ratios. Not a benchmark itself.
"""

import contextlib
import os
import resource
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tfm.config import Config, load_config  # noqa: E402
from tfm.training.data_parallel import DataParallel  # noqa: E402
from tfm.training.distributed import Replicas  # noqa: E402
from tfm.training.session import Session, StopFlag, open_session  # noqa: E402

DATA = Path("/work/shared/data/multi30k")
MULTI30K = [
    "data.src_lang=de",
    "data.tgt_lang=en",
    f"data.train={{format: text, path: {DATA / 'train'}}}",
    f"data.validation={{format: text, path: {DATA / 'val'}}}",
    f"data.test={{format: text, path: {DATA / 'test2016'}}}",
    "model.d_model=256",
    "model.n_heads=8",
    "model.n_encoder_layers=3",
    "model.n_decoder_layers=3",
    "model.d_ff=1024",
    "train.max_tokens=4096",
    "train.device=cpu",
]


def multi30k_config(run_dir: str, overrides: Sequence[str] = ()) -> Config:
    """The issue's Multi30k de-en config (d_model 256, 3 + 3 layers), writing to `run_dir`."""
    return load_config(None, [*MULTI30K, f"run_dir={run_dir}", *overrides])


@contextlib.contextmanager
def training_session(overrides: Sequence[str] = ()) -> Iterator[tuple[Session, DataParallel]]:
    """tfm's own training session (tokenizer trained on Multi30k train, model, AdamW, sampler)
    and its one-process DataParallel, in a temporary run directory. The working directory moves
    there too, so the run is not remembered as the user's last run."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="tfm-bench-") as tmp:
        os.chdir(tmp)
        try:
            config = multi30k_config(str(Path(tmp) / "run"), overrides)
            session = open_session(config, resume=False, overwrite=True)
            yield session, DataParallel(Replicas(), session, StopFlag())
        finally:
            os.chdir(cwd)


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

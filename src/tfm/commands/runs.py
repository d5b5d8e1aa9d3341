"""`tfm data check` and `tfm average`: a corpus looked over before training, and a run's
checkpoints averaged into a new run. Only averaging needs torch, so only it imports it: a check
starts in a fifth of the time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tfm.config import load_config
from tfm.data.check import check_data
from tfm.errors import UsageError
from tfm.rundir.paths import find_run


def check_corpus(config: Path, *, overrides: Sequence[str] = ()) -> dict:
    """The report of `tfm.data.check.check_data` on the corpus the YAML file `config` (with
    `section.key=value` overrides, as `tfm train --set` takes them) names."""
    return check_data(load_config(config, list(overrides)))


def average_run(
    run: str | Path | None, out: Path, *, last: int | None = None, best: int | None = None
) -> Path:
    """The `last` newest or `best` best checkpoints of the run (default: the last one trained
    here) averaged (§6.1) into the new run directory `out`, which is returned. With neither, the
    newest `train.average_last` of the run's config (its plan)."""
    from tfm.rundir.averaging import average_checkpoints

    paths = find_run(run)
    if last is None and best is None:
        last = load_config(paths.config, stored=True).train.average_last
        if last is None or last < 2:
            raise UsageError(
                f"{paths.config} plans no averaging (train.average_last: {last}); "
                "give --last N or --best N"
            )
    return average_checkpoints(paths, out, last=last, best=best)

"""`tfm export`: a run exported to CTranslate2 (`tfm.deploy`), which `tfm eval` and
`tfm translate` then accept as `--run`."""

from __future__ import annotations

from pathlib import Path

from tfm.deploy import export_run
from tfm.rundir.paths import find_run


def export(
    run: str | Path | None, out: Path, *, quantization: str, overwrite: bool, device: str
) -> Path:
    """Export the run (None: the run last trained from here) to CTranslate2 in `out`."""
    export_run(find_run(run).root, out, quantization=quantization, overwrite=overwrite,
               device=device)  # fmt: skip
    return out

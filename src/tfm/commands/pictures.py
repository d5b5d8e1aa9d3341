"""`tfm attention`, `tfm positional` and `tfm plot`: find and read what a picture shows, then
have `tfm.visual` draw it; each returns the path of the file written."""

from __future__ import annotations

import logging
from pathlib import Path

from tfm.commands.engines import open_translator
from tfm.config import load_config
from tfm.errors import UsageError
from tfm.prediction.attention_weights import check_kind
from tfm.prediction.settings import DecodeRequest
from tfm.rundir.manifest import check_manifest
from tfm.rundir.metrics import read_metrics
from tfm.rundir.paths import RunPaths, find_run
from tfm.visual.attention_map import draw_attention
from tfm.visual.curves import FILE_NAME as CURVES_FILE
from tfm.visual.curves import draw_training_curves
from tfm.visual.figure import check_output_path
from tfm.visual.positional import draw_positional

log = logging.getLogger(__name__)


def plot_attention(
    run: str | Path | None,
    sentence: str,
    out: Path | None = None,
    *,
    kind: str = "cross",
    layer: int | None = None,
    head: int | None = None,
    checkpoint: str | Path | None = None,
) -> Path:
    """Translate `sentence` with the run's model (best.pt, or `checkpoint`) on the CPU and draw
    its `kind` attention for `layer` and `head` (1-based; None: all) to `out` (default:
    attention-KIND.png)."""
    out = check_output_path(out or Path(f"attention-{check_kind(kind)}.png"))
    translator = open_translator(DecodeRequest(run=run, checkpoint=checkpoint, device="cpu"))
    view = translator.attention_views(sentence)[kind]
    log.info("%s -> %s", view.source, view.translation)
    return draw_attention(view, out, layer=layer, head=head)


def plot_positional(out: Path | None = None, *, d_model: int = 512, length: int = 100) -> Path:
    """The sinusoidal encoding's first `length` positions at `d_model` (default: positional.png)."""
    return draw_positional(out, d_model=d_model, length=length)


def plot_curves(run: str | Path | None, out: Path | None = None) -> Path:
    """The training curves of a run (default: the last one trained here) from its
    metrics.jsonl, drawn to `out` (default: curves.png in the run directory)."""
    if out is not None:
        check_output_path(out)
    paths = find_run(None) if run is None else RunPaths(Path(run))
    if not paths.metrics.is_file():
        raise UsageError(
            f"{paths.metrics} does not exist; pass --run DIR of a run that has started training"
        )
    events = read_metrics(paths.metrics)
    if not events:
        raise UsageError(f"{paths.metrics} has no events yet; plot again after a few steps")
    smoothing = None
    if paths.config.is_file():
        check_manifest(paths.root, [paths.config.name])
        smoothing = load_config(paths.config, stored=True).train.label_smoothing
    title = f"Training curves of {paths.root} (step {events[-1]['step']:,})"
    return draw_training_curves(
        events, out or paths.root / CURVES_FILE, title=title, label_smoothing=smoothing
    )

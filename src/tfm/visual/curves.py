"""Training curves from a run's metrics.jsonl: loss (training and validation), validation BLEU
and chrF, and the learning rate, against optimizer steps, one panel each on a shared step axis.
"""

from __future__ import annotations

import logging
from pathlib import Path

from tfm.rundir.metrics import series
from tfm.visual.figure import new_figure, save_figure

log = logging.getLogger(__name__)

WIDTH_IN, HEIGHT_IN = 10.0, 9.0  # 1000 x 900 pixels as PNG
FILE_NAME = "curves.png"  # default: next to metrics.jsonl in the run directory


def draw_training_curves(
    events: list[dict], path: Path, *, title: str = "", label_smoothing: float | None = None
) -> Path:
    """Write the three panels for `events` (as `read_metrics` returns them) to `path`."""
    figure = new_figure(WIDTH_IN, HEIGHT_IN)
    loss_ax, score_ax, lr_ax = figure.subplots(3, 1, sharex=True, height_ratios=[3, 2, 1.4])
    smoothed = f" (label smoothing {label_smoothing:g})" if label_smoothing else ""
    _line(loss_ax, events, "train_loss", f"training{smoothed}", alpha=0.8)
    _line(loss_ax, events, "val_loss", "validation (no smoothing)", marker="o")
    loss_ax.set_ylabel("loss (nats per token)")
    _line(score_ax, events, "val_bleu", "BLEU", marker="o")
    _line(score_ax, events, "val_chrf", "chrF", marker="s", linestyle="--", alpha=0.7)
    _mark_best(score_ax, events)
    score_ax.set_ylabel("validation score")
    _line(lr_ax, events, "lr", "learning rate")
    lr_ax.set_ylabel("learning rate")
    lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    lr_ax.set_xlabel("optimizer step")
    for ax in (loss_ax, score_ax, lr_ax):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
        else:
            ax.text(0.5, 0.5, "no events yet", transform=ax.transAxes, ha="center", color="grey")
    figure.suptitle(title or "Training curves", fontsize=11)
    return save_figure(figure, path)


def _line(ax, events: list[dict], key: str, label: str, **style) -> None:
    steps, values = series(events, key)
    if len(steps) == 1:  # a run shorter than one log window: a line of one point needs a marker
        style.setdefault("marker", "o")
    if steps:
        ax.plot(steps, values, label=label, markersize=4, **style)


def _mark_best(ax, events: list[dict]) -> None:
    """A star and a note at the best validation BLEU, which is what best.pt holds by default."""
    steps, values = series(events, "val_bleu")
    finite = [(v, s) for s, v in zip(steps, values, strict=True) if v == v]  # drop NaN
    if not finite:
        return
    value, step = max(finite, key=lambda pair: (pair[0], -pair[1]))
    ax.plot([step], [value], marker="*", markersize=14, color="gold", markeredgecolor="black")
    right_half = step > (min(steps) + max(steps)) / 2  # write the note towards the middle
    ax.annotate(
        f"best BLEU {value:.2f} at step {step:,}",
        (step, value),
        textcoords="offset points",
        xytext=(-10 if right_half else 10, -16),
        ha="right" if right_half else "left",
        fontsize=8,
    )

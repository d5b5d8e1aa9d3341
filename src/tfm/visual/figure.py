"""What every tfm picture shares: a headless matplotlib figure, one resolution, and saving by
extension (PNG by default, SVG or PDF when the file name says so).

matplotlib is imported inside these functions, so `tfm train` never pays for it. Figures are
built with `matplotlib.figure.Figure` and the Agg canvas, never pyplot's global state.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from tfm.errors import UsageError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

DPI = 100  # pixels per inch of a PNG; a figure of w x h inches is (w * DPI) x (h * DPI) pixels
FORMATS = (".png", ".svg", ".pdf")


def check_output_path(path: Path) -> Path:
    """The path with a supported extension, or a UsageError naming the ones there are."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise UsageError(
            f"--out {path}: unknown picture format {suffix or '(no extension)'!r}; "
            f"use a file name ending in {', '.join(FORMATS)}"
        )
    return path


def new_figure(width_in: float, height_in: float) -> Figure:
    """An empty figure of that size in inches, laid out by matplotlib's constrained layout (which
    moves axes to fit their labels but never changes the figure's size)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save_figure(figure: Figure, path: Path) -> Path:
    """Write the figure to `path` (format from its extension), creating missing folders."""
    path = check_output_path(Path(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        figure.savefig(path, dpi=DPI, format=path.suffix.lower().lstrip("."))
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    log.debug("wrote %s", path)
    return path

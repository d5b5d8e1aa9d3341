"""§3.5 Positional Encoding as a picture: the sinusoidal table as a heatmap (positions x
dimensions) and a few of its dimensions as curves, whose wavelengths grow geometrically from 2π
(dimension 0) to 10000 · 2π (the last pair), which is what lets the model read relative offsets.
"""

from __future__ import annotations

import math
from pathlib import Path

from tfm.errors import UsageError
from tfm.transformer import sinusoidal_table
from tfm.visual.figure import new_figure, save_figure

WIDTH_IN, HEIGHT_IN = 11.0, 8.0  # 1100 x 800 pixels as PNG
MAX_D_MODEL, MAX_LENGTH = 8192, 10_000


def curve_dimensions(d_model: int) -> list[int]:
    """Four even (sine) dimensions spread from fast to slow: 0, D/16, D/8 and D/4 rounded down to
    even, without repeats (small d_model gives fewer)."""
    picks = [0, d_model // 16, d_model // 8, d_model // 4]
    return sorted({p - p % 2 for p in picks})


def wavelength(dimension: int, d_model: int) -> float:
    """The period in positions of PE[:, dimension]: 2π · 10000^(2i / d_model), 2i = dimension
    rounded down to even."""
    return 2 * math.pi * 10000 ** ((dimension - dimension % 2) / d_model)


def draw_positional(path: Path | None = None, *, d_model: int = 512, length: int = 100) -> Path:
    """Write the picture of the first `length` positions of a `d_model` encoding; returns the
    path (default positional.png)."""
    if d_model < 2 or d_model % 2 or d_model > MAX_D_MODEL:
        raise UsageError(f"--d-model {d_model}: expected an even number from 2 to {MAX_D_MODEL}")
    if not 1 <= length <= MAX_LENGTH:
        raise UsageError(f"--length {length}: expected 1 to {MAX_LENGTH} positions")
    from matplotlib.ticker import MaxNLocator

    table = sinusoidal_table(length, d_model).numpy()  # (length, D)
    figure = new_figure(WIDTH_IN, HEIGHT_IN)
    heatmap_ax, curves_ax = figure.subplots(2, 1, height_ratios=[3, 2])
    _draw_table(figure, heatmap_ax, table)
    for dimension in curve_dimensions(d_model):
        curves_ax.plot(
            range(length),
            table[:, dimension],
            marker="." if length <= 40 else None,
            label=f"dim {dimension} (wavelength {wavelength(dimension, d_model):,.1f})",
        )
    curves_ax.set_xlim(0, max(length - 1, 1))
    curves_ax.set_ylim(-1.1, 1.1)
    for axis in (heatmap_ax.yaxis, curves_ax.xaxis):
        axis.set_major_locator(MaxNLocator(integer=True))
    curves_ax.set_xlabel("position")
    curves_ax.set_ylabel("PE value")
    curves_ax.set_title("Lower dimensions oscillate fast, higher ones slowly", fontsize=10)
    curves_ax.grid(alpha=0.3)
    curves_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return save_figure(figure, Path(path or "positional.png"))


def _draw_table(figure, ax, table) -> None:
    """The table with its sine columns (even dims) on the left and its cosine columns (odd dims)
    on the right: interleaved, neighbouring sin/cos columns alias into stripes at this size."""
    import numpy as np

    length, d_model = table.shape
    half = d_model // 2
    grouped = np.concatenate([table[:, 0::2], table[:, 1::2]], axis=1)  # (length, D)
    image = ax.imshow(grouped, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    ax.axvline(half - 0.5, color="black", linewidth=1)
    step = next(s for s in (2**k for k in range(1, 14)) if s >= d_model / 6)  # even, a power of 2
    even_dims, odd_dims = range(0, d_model, step), range(1, d_model, step)
    ax.set_xticks(
        [d // 2 for d in even_dims] + [half + d // 2 for d in odd_dims],
        labels=[str(d) for d in (*even_dims, *odd_dims)],
    )
    ax.set_xlabel("dimension (left: sin, even dims 0, 2, 4, …; right: cos, odd dims 1, 3, 5, …)")
    ax.set_ylabel("position")
    ax.set_title(
        f"Sinusoidal positional encoding, d_model = {d_model}, positions 0–{length - 1}\n"
        "PE(pos, 2i) = sin(pos / 10000^(2i / d_model)), PE(pos, 2i+1) = cos(same)",
        fontsize=10,
    )
    figure.colorbar(image, ax=ax, label="PE value", shrink=0.9)

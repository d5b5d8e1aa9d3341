"""Draw an `AttentionView` as a grid of heatmaps: one panel per head, for one layer or all.

Colour is the attention weight on a square-root scale (0 to 1), so the weak attention of a long
row is still visible while the colour bar shows true values; the decoder's masked (future)
positions are grey, which is where its causal, lower-triangular structure shows.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tfm.errors import UsageError
from tfm.prediction.attention_weights import AttentionView
from tfm.visual.figure import new_figure, save_figure

TITLES = {
    "cross": "Encoder-decoder (cross) attention",
    "encoder": "Encoder self-attention",
    "decoder": "Decoder self-attention (causal: grey = future positions, masked)",
}
AXIS_LABELS = {  # kind: (x: keys, y: queries)
    "cross": ("source token (key)", "output token (query that produced it)"),
    "encoder": ("source token (key)", "source token (query)"),
    "decoder": ("decoder input (key)", "decoder input (query)"),
}
CELL_IN = 0.24  # inches per token while a panel stays under MAX_PANEL_IN
MIN_PANEL_IN, MAX_PANEL_IN, MAX_GRID_IN = 1.4, 5.0, 32.0
MAX_COLUMNS_ONE_LAYER = 4
MIN_WIDTH_IN = 6.5  # room for the two title lines
COLORMAP, GAMMA, MASKED_COLOUR = "viridis", 0.5, "#dddddd"  # also the colours of `tfm serve`'s page


@dataclass(frozen=True)
class GridLayout:
    """Which (layer, head) pairs go where (0-based, row by row) and the figure size in inches."""

    panels: list[tuple[int, int]]
    rows: int
    cols: int
    panel_width_in: float
    panel_height_in: float
    width_in: float
    height_in: float


def attention_layout(
    view: AttentionView, *, layer: int | None = None, head: int | None = None
) -> GridLayout:
    """Panels for `layer` and `head` (1-based; None = all): all layers give a layers x heads grid,
    one layer its heads in rows of at most four. Sizes grow with the number of tokens."""
    layers = _pick("--layer", layer, view.n_layers)
    heads = _pick("--head", head, view.n_heads)
    panels = [(lay, h) for lay in layers for h in heads]
    if len(layers) == 1:
        cols = min(len(heads), MAX_COLUMNS_ONE_LAYER)
        rows = math.ceil(len(heads) / cols)
    else:
        rows, cols = len(layers), len(heads)
    n_query, n_key = len(view.query_tokens), len(view.key_tokens)
    panel_w = _clamp(CELL_IN * n_key, MIN_PANEL_IN, min(MAX_PANEL_IN, MAX_GRID_IN / cols))
    panel_h = _clamp(CELL_IN * n_query, MIN_PANEL_IN, min(MAX_PANEL_IN, MAX_GRID_IN / rows))
    longest = max(len(t) for t in view.query_tokens + view.key_tokens)
    label_in = 0.8 + 0.075 * min(longest, 20)  # tick labels plus the axis label
    width = max(label_in + cols * (panel_w + 0.2) + 1.2, MIN_WIDTH_IN)  # + colour bar
    height = 1.0 + rows * (panel_h + 0.35) + label_in  # title, panels with titles, x labels
    return GridLayout(panels, rows, cols, panel_w, panel_h, round(width, 2), round(height, 2))


def draw_attention(
    view: AttentionView, path: Path, *, layer: int | None = None, head: int | None = None
) -> Path:
    """Write the heatmap grid of `view` to `path` (PNG, SVG or PDF by extension)."""
    import matplotlib
    import numpy as np
    from matplotlib.colors import PowerNorm

    layout = attention_layout(view, layer=layer, head=head)
    figure = new_figure(layout.width_in, layout.height_in)
    axes = figure.subplots(layout.rows, layout.cols, squeeze=False)
    cmap = matplotlib.colormaps[COLORMAP].with_extremes(bad=MASKED_COLOUR)
    norm = PowerNorm(gamma=GAMMA, vmin=0.0, vmax=1.0)
    n_query, n_key = len(view.query_tokens), len(view.key_tokens)
    future = np.triu(np.ones((n_query, n_key), dtype=bool), k=1) if view.kind == "decoder" else None
    font = _clamp(72 * min(layout.panel_width_in / n_key, layout.panel_height_in / n_query), 4, 9)
    image = None
    for index, ax in enumerate(axes.flat):
        if index >= len(layout.panels):
            ax.set_visible(False)
            continue
        lay, h = layout.panels[index]
        weights = view.weights[lay, h].numpy()  # (Tq, Tk)
        shown = weights if future is None else np.ma.masked_array(weights, mask=future)
        image = ax.imshow(shown, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
        ax.set_title(f"layer {lay + 1} · head {h + 1}", fontsize=9)
        ax.set_xticks(range(n_key), labels=view.key_tokens, rotation=90, fontsize=font)
        ax.set_yticks(range(n_query), labels=view.query_tokens, fontsize=font)
        col = index % layout.cols
        last_in_column = index + layout.cols >= len(layout.panels)
        ax.tick_params(labelleft=col == 0, labelbottom=last_in_column, length=0)
    assert image is not None  # a view has at least one panel
    figure.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    x_label, y_label = AXIS_LABELS[view.kind]
    figure.supxlabel(x_label, fontsize=10)
    figure.supylabel(y_label, fontsize=10)
    width_chars = max(40, int(layout.width_in * 9))
    pair = textwrap.shorten(f"“{view.source}” → “{view.translation}”", width=width_chars)
    figure.suptitle(f"{TITLES[view.kind]}\n{pair}", fontsize=11)
    return save_figure(figure, path)


def _pick(option: str, value: int | None, count: int) -> list[int]:
    if value is None:
        return list(range(count))
    if not 1 <= value <= count:
        raise UsageError(f"{option} {value}: the model has {count}; choose 1 to {count}")
    return [value - 1]


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(value, max(low, high)))

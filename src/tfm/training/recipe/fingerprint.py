"""What an encoded training split is, measured: BPE tokens per sentence on each side, and the
batch tokens an epoch takes. Everything the recipe sizes in tokens (model, batch, steps)
follows from them; the raw pairs' figures are `tfm.data.corpus_figures`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TokenFigures:
    """The encoded training split: pairs, BPE tokens per sentence on each side (mean and 95th
    percentile, framing excluded), and `batch_tokens`, what an epoch costs in batch tokens
    (each pair counted at its longer framed side, as batches are)."""

    pairs: int
    src_mean: float
    tgt_mean: float
    src_p95: float
    tgt_p95: float
    tgt_tokens: int
    batch_tokens: int


def measure_tokens(src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> TokenFigures:
    """The figures of the framed id lengths of a training split (source: ids + EOS; target:
    BOS + ids + EOS)."""
    src = np.asarray(src_lengths, dtype=np.int64) - 1
    tgt = np.asarray(tgt_lengths, dtype=np.int64) - 2
    if not len(src):
        return TokenFigures(0, 0.0, 0.0, 0.0, 0.0, 0, 0)
    widths = np.maximum(src + 1, tgt + 2)  # as batches count a pair: its longer framed side
    return TokenFigures(
        pairs=len(src),
        src_mean=float(src.mean()),
        tgt_mean=float(tgt.mean()),
        src_p95=float(np.percentile(src, 95)),
        tgt_p95=float(np.percentile(tgt, 95)),
        tgt_tokens=int(tgt.sum()),
        batch_tokens=int(widths.sum()),
    )

"""The training loss: token-level cross-entropy with label smoothing (§5.4)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def token_loss_sum(
    logits: torch.Tensor, targets: torch.Tensor, *, pad_id: int, label_smoothing: float
) -> torch.Tensor:
    """Summed cross-entropy over real (non-pad) target tokens, with label smoothing (§5.4).

    logits (B, T, V), targets (B, T) -> scalar. The caller divides by the number of real tokens,
    so a step's loss does not depend on how tokens fall into batches.
    """
    V = logits.size(-1)
    return F.cross_entropy(
        logits.reshape(-1, V).float(),
        targets.reshape(-1),
        ignore_index=pad_id,
        label_smoothing=label_smoothing,
        reduction="sum",
    )

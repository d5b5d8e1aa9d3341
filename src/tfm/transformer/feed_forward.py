"""§3.3 Position-wise feed-forward networks, eq. (2): FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from tfm.transformer.dropout import Dropout

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}


class PositionwiseFeedForward(nn.Module):
    """Eq. (2), applied to each position separately and identically: D -> F -> D.

    Deviations from §3.3, both off by default (the paper's choice): `activation="gelu"` replaces
    the ReLU (max(0, .)), and `activation_dropout` > 0 drops hidden units after the activation
    (the paper has no dropout there; PyTorch's Transformer has, at its one `dropout` rate).
    """

    def __init__(
        self, *, d_model: int, d_ff: int, activation: str = "relu", activation_dropout: float = 0.0
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is not one of {sorted(ACTIVATIONS)}")
        if not 0.0 <= activation_dropout < 1.0:
            raise ValueError(f"activation_dropout={activation_dropout} is not in [0, 1)")
        self.activation = activation
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = Dropout(activation_dropout)  # p = 0 returns its input as is

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D) -> (B, T, D)."""
        hidden = self.dropout(ACTIVATIONS[self.activation](self.w_1(x)))  # (B, T, F)
        return self.w_2(hidden)  # (B, T, D)

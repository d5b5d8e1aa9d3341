"""§3.3 Position-wise feed-forward networks, eq. (2): FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

import torch.nn.functional as F
from torch import Tensor, nn

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class PositionwiseFeedForward(nn.Module):
    """Eq. (2), applied to each position separately and identically: D -> F -> D.

    Deviation from §3.3: `activation="gelu"` replaces the ReLU (max(0, .)) if asked; "relu" is the
    default and the paper's choice. No dropout inside: the paper has none there (PyTorch's
    Transformer adds one after the activation).
    """

    def __init__(self, *, d_model: int, d_ff: int, activation: str = "relu") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is not one of {sorted(ACTIVATIONS)}")
        self.activation = activation
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D) -> (B, T, D)."""
        hidden = ACTIVATIONS[self.activation](self.w_1(x))  # (B, T, F)
        return self.w_2(hidden)  # (B, T, D)

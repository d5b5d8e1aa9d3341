"""§3.4 Embeddings and Softmax, §3.5 Positional Encoding."""

import math

import torch
from torch import Tensor, nn


class TokenEmbedding(nn.Module):
    """§3.4: learned token embeddings, multiplied by sqrt(d_model).

    `weight` (V, D) is the matrix the output projection may share (see `model.Transformer`).
    """

    def __init__(self, *, vocab_size: int, d_model: int) -> None:
        super().__init__()
        if vocab_size < 1 or d_model < 1:
            raise ValueError(f"vocab_size={vocab_size} and d_model={d_model} must be positive")
        self.d_model = d_model
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        nn.init.normal_(self.weight)

    def forward(self, ids: Tensor) -> Tensor:
        """ids (B, T) long -> (B, T, D)."""
        return nn.functional.embedding(ids, self.weight) * math.sqrt(self.d_model)


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """§3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same angle).

    Computed in float64 and rounded once to float32. Returns (max_len, D).
    """
    if d_model % 2 != 0:
        raise ValueError(f"d_model={d_model} must be even for the sin/cos positional encoding")
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (D/2,)
    angle = position / torch.pow(10000.0, two_i / d_model)  # (max_len, D/2)
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()


class PositionalEncoding(nn.Module):
    """§3.5: adds the fixed sinusoidal encoding of each position to its embedding.

    The table is a non-persistent buffer: it follows `.to(device)` but is not saved in
    checkpoints, since it is a function of (max_len, d_model) alone.
    """

    table: Tensor  # (max_len, D), registered as a buffer

    def __init__(self, *, d_model: int, max_len: int) -> None:
        super().__init__()
        if max_len < 1:
            raise ValueError(f"max_len={max_len} must be positive")
        self.max_len = max_len
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, *, offset: int = 0, positions: Tensor | None = None) -> Tensor:
        """x (B, T, D) holding positions offset..offset+T-1 -> x + PE, (B, T, D). With
        `positions` (T,) long, x holds those positions instead (a packed batch, whose positions
        start again at each sentence; the caller checks them against max_len)."""
        if positions is not None:
            return x + self.table[positions]  # (B, T, D)
        end = offset + x.size(1)
        if end > self.max_len:
            raise ValueError(
                f"input length {end} is longer than the positional encoding table "
                f"max_len={self.max_len}"
            )
        return x + self.table[offset:end]

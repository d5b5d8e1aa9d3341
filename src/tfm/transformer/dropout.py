"""§5.4 Regularization: dropout, with a cheaper random mask on the CPU.

`nn.Dropout` draws one random number per element on the CPU (about 5 ns each), which was 16% of
a Multi30k training step in float32 and more under bf16 autocast, where the matmuls get faster and
dropout does not. `Dropout` here draws one 64-bit integer per four elements and compares 16-bit
slices of it with p: the same distribution up to p rounded to a multiple of 1/65536, for under a
third of the time. On other devices it is `F.dropout`.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_LEVELS = 2**16  # values of one 16-bit slice


def drop_mask(shape: torch.Size | tuple[int, ...], p: float) -> Tensor:
    """Bool tensor of `shape` on the CPU, True (drop) with probability round(p * 65536) / 65536,
    independently per element; from torch's default generator, so `torch.manual_seed` fixes it."""
    n = math.prod(shape)
    words = torch.randint(-(2**63), 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64)
    slices = words.view(torch.int16)[:n].view(shape)  # each uniform on [-32768, 32767]
    return slices < round(p * _LEVELS) - _LEVELS // 2


class _MaskedScale(torch.autograd.Function):
    """x / (1 - p) where the mask keeps it, 0 where it drops; keeps only the bool mask for the
    backward pass, as `F.dropout` does."""

    @staticmethod
    def forward(ctx, x: Tensor, dropped: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(dropped)
        ctx.scale = scale
        return (x * scale).masked_fill_(dropped, 0.0)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        (dropped,) = ctx.saved_tensors
        return (grad * ctx.scale).masked_fill_(dropped, 0.0), None, None


class Dropout(nn.Module):
    """Drop each element with probability `p` in training and scale the rest by 1 / (1 - p);
    the identity in eval mode or at p = 0 (as `nn.Dropout`)."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout={p} is not in [0, 1)")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        return _MaskedScale.apply(x, drop_mask(x.shape, self.p), 1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}"

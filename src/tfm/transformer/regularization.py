"""§5.4 Regularization: residual dropout, applied to each sublayer's output and to the sums of the
embeddings and the positional encodings.

On CPU, `Dropout` draws its mask from 16-bit random numbers, two from each 32-bit draw of torch's
generator, where `nn.Dropout` draws a 32-bit number per element: the random numbers were most of
the cost of dropout (about 6% of a training step of the d_model 256 model), and this is about
three times cheaper. The drop probability is then rounded to a multiple of 1/65536 (0.1 becomes
0.100006). Elsewhere (CUDA) it is `F.dropout`, whose kernel is already fast.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_LEVELS = 1 << 16  # values of a 16-bit random number


def dropout_mask(shape: torch.Size, p: float, *, device: torch.device) -> Tensor:
    """A bool mask of `shape`, True = keep, each element dropped independently with probability
    round(p * 65536) / 65536."""
    n = shape.numel()
    words = torch.randint(
        -(1 << 31), (1 << 31) - 1, ((n + 1) // 2,), dtype=torch.int32, device=device
    )
    halves = words.view(torch.int16)[:n]  # uniform over [-32768, 32767]
    threshold = round(p * _LEVELS) - (_LEVELS // 2)  # P(half < threshold) = p, rounded
    return (halves >= threshold).view(shape)


class _ScaleKept(torch.autograd.Function):
    """x * keep / (1 - p), saving only the bool mask for the backward pass."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x * keep * scale

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        (keep,) = ctx.saved_tensors
        return grad * keep * ctx.scale, None, None


class Dropout(nn.Module):
    """Inverted dropout like `nn.Dropout(p)`: in training, zero each element with probability p
    and scale the rest by 1 / (1 - p); in eval mode, the identity."""

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout={p} is not in [0, 1)")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        keep = dropout_mask(x.shape, self.p, device=x.device)
        return _ScaleKept.apply(x, keep, 1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}"

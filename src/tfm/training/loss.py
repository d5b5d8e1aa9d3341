"""The training loss: token-level cross-entropy with label smoothing (§5.4).

With label smoothing ε over a vocabulary of V, the loss of one token with target t and
log-probabilities log p is (1 - ε) (-log p_t) + ε / V Σ_v (-log p_v), as in `F.cross_entropy`;
its gradient with respect to the logits is p - (1 - ε) onehot(t) - ε / V.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def token_loss_sum(
    logits: Tensor, targets: Tensor, *, pad_id: int, label_smoothing: float
) -> Tensor:
    """Summed cross-entropy over real (non-pad) target tokens, with label smoothing (§5.4).

    logits (..., V), targets (...) -> scalar; e.g. (B, T, V) and (B, T), or only the real
    positions, (N, V) and (N,). The caller divides by the number of real tokens,
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


def projected_loss_sum(
    hidden: Tensor, weight: Tensor, targets: Tensor, *, label_smoothing: float, chunk: int = 1024
) -> Tensor:
    """`token_loss_sum(hidden @ weight.T, targets)` without ever holding all the logits: the
    vocabulary projection and the loss together, `chunk` rows at a time.

    hidden (N, D), weight (V, D) (the output projection), targets (N,) long, all real tokens (no
    padding) -> scalar. The forward pass also computes both gradients, chunk by chunk, while each
    chunk's logits are still in cache, and the backward pass only scales them. Saves memory (no
    (N, V) logits and their gradient) and about a sixth of the time of the two separate steps.
    Under autocast the matrix products run in its dtype; the softmax is float32.
    """
    return _ProjectedCrossEntropy.apply(hidden, weight, targets, label_smoothing, chunk)


def _operands(hidden: Tensor, weight: Tensor) -> tuple[Tensor, ...]:
    """For the fused loss: hidden and weight in autocast's dtype if it is on (the matrix
    products run in it), the zeroed float32 weight gradient, an empty hidden gradient and a
    float32 scalar to sum the loss into."""
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    return (
        hidden if dtype is None else hidden.to(dtype),
        weight if dtype is None else weight.to(dtype),
        torch.empty_like(hidden),
        torch.zeros(weight.shape, dtype=torch.float32, device=weight.device),
        torch.zeros((), dtype=torch.float32, device=hidden.device),
    )


class _ProjectedCrossEntropy(torch.autograd.Function):
    """The forward pass computes the loss and saves both gradients, (grad_hidden, grad_weight);
    the backward pass only scales them."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, targets: Tensor, eps: float, chunk: int):
        h_all, w, grad_hidden, grad_weight, total = _operands(hidden, weight)
        with torch.autocast(hidden.device.type, enabled=False):
            V, rows = w.size(0), min(chunk, hidden.size(0))
            # One float32 buffer for every chunk's logits, softmax and gradient (and one in the
            # matmuls' dtype under autocast): a fresh (chunk, V) tensor per chunk costs page faults.
            scores = torch.empty(rows, V, dtype=torch.float32, device=w.device)
            low = None if w.dtype == torch.float32 else torch.empty_like(scores, dtype=w.dtype)
            for start in range(0, hidden.size(0), chunk):
                h, t = h_all[start : start + chunk], targets[start : start + chunk]
                z = scores[: t.numel()]  # (n, V)
                if low is None:
                    torch.mm(h, w.t(), out=z)
                else:
                    z.copy_(torch.mm(h, w.t(), out=low[: t.numel()]))
                z -= z.amax(dim=-1, keepdim=True)  # logits shifted to a maximum of 0
                picked, row_sum = z.gather(1, t[:, None]), z.sum(dim=-1, keepdim=True)  # (n, 1)
                norm = z.exp_().sum(dim=-1, keepdim=True)  # (n, 1); z: unnormalised probabilities
                log_norm = norm.log()  # -log p_v = log_norm - z_v for the shifted z
                total += ((1 - eps) * (log_norm - picked) + eps * log_norm).sum()
                total -= eps / V * row_sum.sum()
                grad = z.div_(norm)  # (n, V): the softmax, then its gradient
                grad -= eps / V
                grad[torch.arange(t.numel(), device=t.device), t] -= 1 - eps
                if low is None:  # no casts: write and accumulate in place
                    torch.mm(grad, w, out=grad_hidden[start : start + chunk])
                    grad_weight.addmm_(grad.t(), h)
                else:
                    grad = low[: t.numel()].copy_(grad)
                    grad_hidden[start : start + chunk] = grad @ w
                    grad_weight += (grad.t() @ h).float()
        ctx.save_for_backward(grad_hidden, grad_weight.to(weight.dtype))
        return total

    @staticmethod
    def backward(ctx, grad_total: Tensor):
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_total, grad_weight * grad_total, None, None, None

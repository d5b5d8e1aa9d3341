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


class _ProjectedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, targets: Tensor, eps: float, chunk: int):
        device = hidden.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
        with torch.autocast(device, enabled=False):
            h_all = hidden if dtype is None else hidden.to(dtype)
            w = weight if dtype is None else weight.to(dtype)
            V = w.size(0)
            grad_hidden = torch.empty_like(hidden)
            grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
            total = torch.zeros((), dtype=torch.float32, device=hidden.device)
            for start in range(0, hidden.size(0), chunk):
                h, t = h_all[start : start + chunk], targets[start : start + chunk]
                log_probs = (h @ w.t()).float()  # (n, V)
                log_probs -= log_probs.logsumexp(dim=-1, keepdim=True)
                total -= (1 - eps) * log_probs.gather(1, t[:, None]).sum()
                total -= eps / V * log_probs.sum()
                grad = log_probs.exp_()  # (n, V): the softmax, then its gradient
                grad -= eps / V
                grad[torch.arange(t.numel(), device=t.device), t] -= 1 - eps
                grad = grad.to(w.dtype)
                if grad.dtype == torch.float32:  # no casts: write and accumulate in place
                    torch.mm(grad, w, out=grad_hidden[start : start + chunk])
                    grad_weight.addmm_(grad.t(), h)
                else:
                    grad_hidden[start : start + chunk] = grad @ w
                    grad_weight += (grad.t() @ h).float()
        ctx.save_for_backward(grad_hidden, grad_weight.to(weight.dtype))
        return total

    @staticmethod
    def backward(ctx, grad_total: Tensor):
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_total, grad_weight * grad_total, None, None, None


def rdrop_loss_sum(
    hidden: Tensor, weight: Tensor, targets: Tensor, *, label_smoothing: float, alpha: float
) -> Tensor:
    """R-Drop (Liang et al., 2021): the same N target tokens through two passes of the model
    with different dropout masks, stacked as hidden (2N, D), rows i and N + i the same token;
    weight (V, D) the output projection and targets (N,) long -> scalar, summed over the N tokens:

        ½ (CE₁ + CE₂) + α/4 (KL(p₁ ‖ p₂) + KL(p₂ ‖ p₁))

    per token, CE the label-smoothed cross-entropy of `token_loss_sum`. This is the paper's
    CE₁ + CE₂ + α/2 (KL + KL) halved, so α means what it does there and, with the two passes
    equal (no dropout), the loss and its gradient are plain cross-entropy. The logits of all 2N
    rows are held at once (float32), unlike `projected_loss_sum`.
    """
    n = targets.numel()
    if hidden.size(0) != 2 * n:
        raise ValueError(f"hidden has {hidden.size(0)} rows; R-Drop needs two per target ({2 * n})")
    log_probs = F.log_softmax((hidden @ weight.t()).float(), dim=-1)  # (2N, V)
    first, second = log_probs[:n], log_probs[n:]
    cross_entropy = F.nll_loss(first, targets, reduction="sum") + F.nll_loss(
        second, targets, reduction="sum"
    )
    if label_smoothing:  # F.cross_entropy's smoothing: ε/V Σ_v (-log p_v) against (1 - ε)
        uniform = -log_probs.sum() / log_probs.size(-1)
        cross_entropy = (1 - label_smoothing) * cross_entropy + label_smoothing * uniform
    symmetric_kl = ((first.exp() - second.exp()) * (first - second)).sum()  # KL(1‖2) + KL(2‖1)
    return cross_entropy / 2 + alpha / 4 * symmetric_kl

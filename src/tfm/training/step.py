"""One optimizer step: the §5.3 learning rate, the §5.4 label-smoothed loss over a step's batches,
gradient clipping and the AdamW update.

`optimizer_step` is the public training step: the training loop takes every step through it, and
so do the benchmarks (bench/train_speed.py, decode_speed.py, cuda_precision.py), which time it
on a real `Session`:

    parallel = DataParallel(Replicas(), session, StopFlag())    # one process
    data = session.epochs.data(0)
    result = optimizer_step(session, parallel, [data.batch(data.batches[0])])
    result.loss, result.tokens                                   # mean token loss, real tokens
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tfm.data.batching import Batch
from tfm.data.tokenizer import PAD_ID
from tfm.errors import TrainingError
from tfm.loss import projected_loss_sum
from tfm.training.data_parallel import DataParallel
from tfm.training.schedule import rate_at
from tfm.training.session import Session

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepResult:
    """What one step did: `loss` is its mean label-smoothed loss per real target token, over all
    processes (None: the loss or gradient was not finite and the update was skipped); `tokens`
    its real target tokens, over all processes."""

    loss: float | None
    tokens: int


def optimizer_step(
    session: Session, parallel: DataParallel, batches: Sequence[Batch]
) -> StepResult:
    """One update from `batches` (accumulated; on the CPU, moved to the session's device here):
    `session.progress.step` advances by one and the learning rate follows it. The loss is
    normalised by all the step's real target tokens, on all processes under torchrun.

    A non-finite loss or gradient skips the update (counted); after `train.max_nonfinite` such
    steps in a row, training stops with a TrainingError.
    """
    cfg, p, model, optimizer = session.config, session.progress, session.model, session.optimizer
    p.step += 1
    parallel.begin_step(p.step)
    lr = rate_at(p.step, cfg)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    n_tokens = parallel.sum(sum(b.n_tgt_tokens for b in batches))
    parallel.module.train()
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for i, batch in enumerate(batches):
        with parallel.gradient_sync(last=i == len(batches) - 1):
            batch = batch.to(session.device)
            with session.autocast():
                loss = batch_loss_sum(session, parallel.module, batch)
            loss = loss / n_tokens
            parallel.backward(loss)
        total += float(loss.detach())
    total = parallel.sum(total)  # the same on every process, and so is the gradient norm
    grads = [q.grad for q in model.parameters() if q.grad is not None]
    if cfg.train.clip_norm is not None:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip_norm)
    else:
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if not (math.isfinite(total) and bool(torch.isfinite(norm))):
        _skip(session, lr)
        return StepResult(loss=None, tokens=n_tokens)
    p.nonfinite_in_a_row = 0
    optimizer.step()
    p.tokens_seen += n_tokens
    return StepResult(loss=total, tokens=n_tokens)


def _skip(session: Session, lr: float) -> None:
    """Count a non-finite step and drop its gradients; stop when too many came in a row."""
    p = session.progress
    p.nonfinite_in_a_row += 1
    p.nonfinite_total += 1
    session.optimizer.zero_grad(set_to_none=True)
    log.warning("step %d: non-finite loss or gradient (lr %.3g); update skipped", p.step, lr)
    if p.nonfinite_in_a_row >= session.config.train.max_nonfinite:
        raise TrainingError(
            f"training stopped at step {p.step}: {p.nonfinite_in_a_row} non-finite losses in a "
            f"row (lr {lr:.3g}); try a lower train.lr, more train.warmup_steps, "
            "train.clip_norm, or train.precision: fp32"
        )


def batch_loss_sum(session: Session, module: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """The summed label-smoothed cross-entropy (§5.4) of one batch's real target tokens; `module`
    is the model as the step calls it (`parallel.module`: DDP-wrapped or compiled)."""
    weight = session.model.output_projection.weight
    real = batch.tgt_out != PAD_ID  # (B, T): padding gets no logits at all
    hidden = module(batch.src, batch.tgt_in, keep=real, project=False)  # (N, D)
    return projected_loss_sum(
        hidden, weight, batch.tgt_out[real], label_smoothing=session.config.train.label_smoothing
    )

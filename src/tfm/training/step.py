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
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tfm.config import planned
from tfm.data.batching import Batch
from tfm.training.batch_layout import BatchLoss, layout_loss_sum, static
from tfm.training.data_parallel import DataParallel
from tfm.training.session import Session
from tfm.training.state import DeviceStep
from tfm.training.utilisation import step_flops

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepResult:
    """What one step did: `loss` is its mean label-smoothed loss per real target token, over all
    processes (None: the loss or gradient was not finite and the update was skipped); `tokens`
    its real target tokens, over all processes. Reading `loss` waits for the device: the
    training loop reads its steps in bulk instead (`UnreadSteps`)."""

    on_device: DeviceStep

    @property
    def loss(self) -> float | None:
        step = self.on_device
        loss, finite = torch.stack([step.loss, step.finite.to(step.loss.dtype)]).tolist()
        return loss if finite else None

    @property
    def tokens(self) -> int:
        return self.on_device.tokens


def optimizer_step(
    session: Session, parallel: DataParallel, batches: Sequence[Batch]
) -> StepResult:
    """One update from `batches` (accumulated; on the CPU, moved to the session's device here):
    `session.progress.step` advances by one and the learning rate follows it. The loss is
    normalised by all the step's real target tokens, on all processes under torchrun.

    The step never waits for the device: its loss and finiteness stay there, in
    `session.unread`, until the loop reads them (on a CPU device, at once). A non-finite loss or
    gradient skips the update on the device (fused AdamW's `found_inf`); reading it counts it, and
    after `train.max_nonfinite` such steps in a row, training stops with a TrainingError.
    """
    cfg, p, model, optimizer = session.config, session.progress, session.model, session.optimizer
    p.step += 1
    parallel.begin_step(p.step)
    lr = session.rate(p.step)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    if cfg.train.static_shapes:
        max_tokens = planned(cfg.train.max_tokens, "train.max_tokens")
        batches = [static(b, max_tokens=max_tokens) for b in batches]
    n_tokens = parallel.sum(sum(b.n_tgt_tokens for b in batches))
    parallel.module.train()
    optimizer.zero_grad(set_to_none=True)
    # Summed in float64 (float32 on MPS, which has none), as the host once summed the losses.
    total = torch.zeros((), dtype=_sum_dtype(session.device), device=session.device)
    for i, batch in enumerate(batches):
        with parallel.gradient_sync(last=i == len(batches) - 1):
            loss = batch_loss_sum(session, parallel.module, batch) / n_tokens
            parallel.backward(loss)
        total = total + loss.detach().to(total.dtype)
    total = parallel.sum(total)  # the same on every process, and so is the gradient norm
    grads = [q.grad for q in model.parameters() if q.grad is not None]
    if cfg.train.clip_norm is not None:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip_norm)
    else:
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    finite = torch.isfinite(total) & torch.isfinite(norm)
    _update_unless(optimizer, skip=~finite)
    flops = step_flops(session.model_args, batches, packed=cfg.train.layout == "packed")
    result = DeviceStep(step=p.step, lr=lr, tokens=n_tokens, loss=total, finite=finite, flops=flops)
    session.unread.add(result)
    if session.read_each_step:
        session.read_steps()
    return StepResult(result)


def _sum_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64


def _update_unless(optimizer: torch.optim.Optimizer, *, skip: torch.Tensor) -> None:
    """The optimizer's step, left out where `skip` (a bool scalar) is True. Fused AdamW decides
    on the device, as its `found_inf` for mixed-precision loss scaling does (the step count, the
    moments and the weights all stay); any other optimizer makes the host read `skip`."""
    if not optimizer.defaults.get("fused"):
        if not bool(skip):
            optimizer.step()
        return
    found_inf = skip.to(torch.float32)
    optimizer.found_inf = found_inf  # type: ignore[attr-defined]
    try:
        optimizer.step()
    finally:
        del optimizer.found_inf  # type: ignore[attr-defined]


def batch_loss_sum(session: Session, module: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """The summed label-smoothed cross-entropy (§5.4) of one batch's real target tokens, under
    the session's autocast; `module` is the model as the step calls it (`parallel.module`:
    DDP-wrapped or compiled). The batch reaches the model as `train.layout` says."""
    smoothing = planned(session.config.train.label_smoothing, "train.label_smoothing")
    loss = BatchLoss(session.device, session.dtype, session.model.output_projection.weight,
                     label_smoothing=smoothing)  # fmt: skip
    return layout_loss_sum(session.config.train.layout, module, batch, loss)

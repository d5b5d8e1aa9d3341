"""The training loop: token-budget batches, §5.3 schedule, validation, checkpoints, budgets.

`train(config)` is the one entry point. It trains (or resumes) the run in `config.run_dir` until
a budget (steps, epochs, minutes), early stopping or a stop request ends it, writing `last.pt`,
`best.pt`, rotating training-state checkpoints and `metrics.jsonl` as it goes.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import dataclass

import torch
from tqdm import tqdm

from tfm.config import Config, TrainConfig
from tfm.data.batching import Batch, EpochData, collate
from tfm.data.tokenizer import PAD_ID
from tfm.device import peak_memory_mib
from tfm.errors import TrainingError
from tfm.loss import projected_loss_sum
from tfm.training.data_parallel import DataParallel
from tfm.training.distributed import open_session_everywhere, process_group
from tfm.training.schedule import learning_rate, peak_learning_rate
from tfm.training.session import Session, StopFlag

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    run_dir: str
    steps: int
    epochs_completed: int
    stopped_because: str
    best_score: float | None
    best_step: int | None
    interrupted_by: str | None = None
    rank: int = 0  # this process's rank under torchrun; only rank 0 writes files
    peak_mib: float = 0.0  # the most memory held: process RSS, or GPU allocations on CUDA


def train(
    config: Config,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress_bar: bool = True,
    stop: StopFlag | None = None,
) -> TrainResult:
    """Train (or `resume`) the run described by `config`; see the module docstring.

    Under torchrun, this process trains one data-parallel replica (`training/distributed.py`).
    """
    with process_group(config) as replicas:
        session = open_session_everywhere(replicas, config, resume=resume, overwrite=overwrite)
        parallel = DataParallel(replicas, session, stop or StopFlag())
        return _train(session, parallel, progress_bar=progress_bar)


def _train(session: Session, parallel: DataParallel, *, progress_bar: bool) -> TrainResult:
    bar = tqdm(
        total=_planned_steps(session, parallel),
        initial=session.progress.step,
        disable=not progress_bar or not parallel.is_main,
        unit="step",
        dynamic_ncols=True,
        leave=False,
        mininterval=1.0 if sys.stderr.isatty() else 30.0,  # a log file gets a line per 30 s
    )
    try:
        reason = _run(session, parallel, bar)
    finally:
        bar.close()
    if parallel.is_main and session.saved_step != session.progress.step:
        session.save_checkpoint(score=None)
    parallel.wait_for_main()
    p = session.progress
    return TrainResult(
        run_dir=str(session.paths.root),
        steps=p.step,
        epochs_completed=p.epoch,
        stopped_because=reason,
        best_score=p.best_score,
        best_step=p.best_step,
        interrupted_by=parallel.stop.signal_name,
        rank=parallel.replicas.rank,
        peak_mib=peak_memory_mib(session.device),
    )


def _planned_steps(session: Session, parallel: DataParallel) -> int | None:
    """The step count the step and epoch budgets allow (for the progress bar), or None."""
    t = session.config.train
    per_step = t.accumulate * parallel.replicas.world_size
    by_epochs = None
    if t.max_epochs is not None:  # with BPE-dropout, from the batches of the epoch it starts in
        first, both = session.progress.epoch, min(t.bidirectional_epochs, t.max_epochs)
        by_epochs = 0
        if both < t.max_epochs:
            per_epoch = len(session.epoch_data(max(first, both)).batches)
            by_epochs += (t.max_epochs - both) * (per_epoch // per_step)
        # Bidirectional epochs have about twice the batches. Asked last: when training starts in
        # one, it is the epoch the session keeps for the loop.
        if both:
            per_epoch = len(session.epoch_data(min(first, both - 1)).batches)
            by_epochs += both * (per_epoch // per_step)
    budgets = [n for n in (t.max_steps, by_epochs) if n is not None]
    return min(budgets) if budgets else None


def _run(session: Session, parallel: DataParallel, bar: tqdm) -> str:
    t = session.config.train
    p = session.progress
    started = time.monotonic() - p.elapsed_s
    if spent := _budget_spent(session):
        log.info("nothing to train: the run has already reached train.%s", spent)
        return spent
    window_tokens, window_start, window_loss, window_steps = 0, time.monotonic(), 0.0, 0
    while t.max_epochs is None or p.epoch < t.max_epochs:
        data = session.epoch_data(p.epoch)
        while p.position < len(data.batches):
            group, consumed = parallel.shard(data.batches, p.position)
            if not group:
                break
            loss, n_tokens = _optimizer_step(session, parallel, data, group)
            p.position += consumed
            p.elapsed_s = time.monotonic() - started
            if loss is not None:
                window_loss, window_steps = window_loss + loss, window_steps + 1
                window_tokens += n_tokens
            bar.update(1)
            if p.step % t.log_every == 0 and window_steps and parallel.is_main:
                elapsed = max(time.monotonic() - window_start, 1e-9)
                event = {
                    "step": p.step,
                    "epoch": p.epoch,
                    "train_loss": window_loss / window_steps,
                    "lr": session.optimizer.param_groups[0]["lr"],
                    "tokens_per_s": round(window_tokens / elapsed, 1),
                    "peak_mib": round(peak_memory_mib(session.device)),
                }
                session.write_metrics(event)
                bar.set_postfix(
                    loss=f"{event['train_loss']:.3f}",
                    lr=f"{event['lr']:.2e}",
                    tok_s=f"{event['tokens_per_s']:.0f}",
                )
                window_tokens, window_start, window_loss, window_steps = 0, time.monotonic(), 0, 0
            reason = _after_step(session, parallel, started)
            if reason:
                return reason
        p.epoch += 1
        p.position = 0
    if session.validated_step != p.step:
        parallel.validate()
    return "max_epochs"


def _budget_spent(session: Session) -> str | None:
    """The step, epoch or time budget a resumed run had used up before this process took a step."""
    t, p = session.config.train, session.progress
    if t.max_epochs is not None and p.epoch >= t.max_epochs:
        return "max_epochs"
    if _out_of_steps(t, p.step):
        return "max_steps"
    if _out_of_time(t, p.elapsed_s):
        return "max_minutes"
    return None


def _out_of_steps(t: TrainConfig, step: int) -> bool:
    return t.max_steps is not None and step >= t.max_steps


def _out_of_time(t: TrainConfig, elapsed_s: float) -> bool:
    return t.max_minutes is not None and elapsed_s >= 60 * t.max_minutes


def _after_step(session: Session, parallel: DataParallel, started: float) -> str | None:
    """Validate when due; say why training ends now, or None to go on."""
    t = session.config.train
    p = session.progress
    stop = parallel.stop
    out_of_time = _out_of_time(t, time.monotonic() - started)
    out_of_time = parallel.agree(out_of_time)  # every process sees what any one of them saw
    if stop.requested:
        return "interrupted"
    out_of_steps = _out_of_steps(t, p.step)
    if p.step % t.validate_every == 0 or out_of_steps or out_of_time:
        if parallel.validate():
            return "early_stopping"
        if stop.requested:
            return "interrupted"
    elif t.checkpoint_every is not None and p.step % t.checkpoint_every == 0:
        parallel.checkpoint()
    if out_of_steps:
        return "max_steps"
    if out_of_time:
        return "max_minutes"
    return None


def _optimizer_step(
    session: Session, parallel: DataParallel, data: EpochData, group: list[list[int]]
) -> tuple[float | None, int]:
    """One update from `group` (accumulated batches); the loss is normalised by all its tokens,
    on all processes under torchrun, and the loss returned and tokens counted are the step's.

    A non-finite loss or gradient skips the update (counted); after `train.max_nonfinite` such
    steps in a row, training stops with a TrainingError.
    """
    cfg, p, model, optimizer = session.config, session.progress, session.model, session.optimizer
    p.step += 1
    parallel.begin_step(p.step)
    lr = learning_rate(p.step, peak=peak_learning_rate(cfg), warmup_steps=cfg.train.warmup_steps)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    batches = [collate([data.src[i] for i in b], [data.tgt[i] for i in b]) for b in group]
    n_tokens = parallel.sum(sum(b.n_tgt_tokens for b in batches))
    parallel.module.train()
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for i, batch in enumerate(batches):
        with parallel.gradient_sync(last=i == len(batches) - 1):
            batch = batch.to(session.device)
            with session.autocast():
                loss = _batch_loss_sum(session, parallel.module, batch)
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
        p.nonfinite_in_a_row += 1
        p.nonfinite_total += 1
        optimizer.zero_grad(set_to_none=True)
        log.warning("step %d: non-finite loss or gradient (lr %.3g); update skipped", p.step, lr)
        if p.nonfinite_in_a_row >= cfg.train.max_nonfinite:
            raise TrainingError(
                f"training stopped at step {p.step}: {p.nonfinite_in_a_row} non-finite losses in a "
                f"row (lr {lr:.3g}); try a lower train.lr, more train.warmup_steps, "
                "train.clip_norm, or train.precision: fp32"
            )
        return None, n_tokens
    p.nonfinite_in_a_row = 0
    optimizer.step()
    p.tokens_seen += n_tokens
    return total, n_tokens


def _batch_loss_sum(session: Session, module: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """The summed label-smoothed cross-entropy of one batch's real target tokens."""
    weight = session.model.output_projection.weight
    real = batch.tgt_out != PAD_ID  # (B, T): padding gets no logits at all
    hidden = module(batch.src, batch.tgt_in, keep=real, project=False)  # (N, D)
    return projected_loss_sum(
        hidden, weight, batch.tgt_out[real], label_smoothing=session.config.train.label_smoothing
    )

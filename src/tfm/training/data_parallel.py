"""The training loop's view of the other processes under torchrun: shares of each step's batches,
DistributedDataParallel, sums over processes and agreed decisions. The design is described in
`tfm.training.distributed`; on one process every method here leaves the loop exactly as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
import os
import shutil
import signal
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from tfm.errors import UsageError
from tfm.training.distributed import Replicas
from tfm.training.session import Session, StopFlag
from tfm.training.state import Progress, StepPlan
from tfm.training.validation import validate_and_checkpoint

log = logging.getLogger(__name__)
Number = TypeVar("Number", int, float, torch.Tensor)

# What inductor's CPU code generation calls (it reads $CXX first).
_CXX = tuple(c for c in (os.environ.get("CXX"), "g++", "c++", "clang++") if c)

# The model's only buffers are fixed positional tables: no need to broadcast them every forward.
# torch 2.13 renamed DDP's option (and warns about the old name).
_NO_BUFFER_SYNC: dict[str, Any] = (
    {"forward_sync_buffers": False}
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
    else {"broadcast_buffers": False}
)


@dataclass
class AgreedStop:
    """The stop request as all processes last agreed on it.

    A signal that lands on one process after it shared its flag only counts at the next
    agreement, so that every process stops after the same step.
    """

    signal_name: str | None = None

    @property
    def requested(self) -> bool:
        return self.signal_name is not None


def shard(
    batches: list[list[int]], position: int, *, accumulate: int, rank: int, world_size: int
) -> tuple[list[list[int]], int]:
    """This process's batches for the step that starts at global batch `position`, and how many
    global batches the step consumes. No batches: too few are left for every process to get one.
    """
    span = batches[position : position + world_size * accumulate]
    if len(span) < world_size:
        return [], len(span)
    return span[rank::world_size], len(span)


def compiled(
    module: torch.nn.Module, device: torch.device, *, static_shapes: bool = False
) -> torch.nn.Module:
    """`module` under `torch.compile` for training steps. Shapes vary from batch to batch, so
    compiled for dynamic shapes (a few compilations in all, not one per batch shape); with
    `static_shapes` (batches padded to a few fixed shapes), once per shape, and on CUDA in
    "reduce-overhead" mode, which replays each shape's kernels as a CUDA graph. It shares the
    parameters; checkpoints keep saving the uncompiled model. On CPU, inductor needs a C++
    compiler: without one, a one-line error instead of a failure at the first step."""
    if device.type == "cpu" and not any(shutil.which(c) for c in _CXX):
        raise UsageError(
            "train.compile: torch.compile on CPU needs a C++ compiler (g++, c++ or clang++; "
            "none found on PATH); install one or set train.compile: false"
        )
    log.info("train.compile: the model is compiled at its first training step (this takes a while)")
    if not static_shapes:
        return cast(torch.nn.Module, torch.compile(module, dynamic=True))
    mode = "reduce-overhead" if device.type == "cuda" else None
    return cast(torch.nn.Module, torch.compile(module, dynamic=False, mode=mode))


class DataParallel:
    """What the training loop asks of the other processes; on one process, nothing at all.

    `module` is the model to call in training (the DDP wrapper under torchrun; compiled with
    `torch.compile` when train.compile is on), `stop` the stop request to read (the agreed one
    under torchrun, the signal handler's own otherwise).
    """

    def __init__(self, replicas: Replicas, session: Session, stop: StopFlag) -> None:
        self.replicas, self.session = replicas, session
        self.module: torch.nn.Module = session.model
        self.stop: StopFlag | AgreedStop = stop
        self._local_stop = stop
        self._told_tail = False
        if replicas.active:
            self._start_ddp()
        if session.config.train.compile:
            self.module = compiled(
                self.module, session.device, static_shapes=session.config.train.static_shapes
            )
        stop.training = True  # from now on, a stop request finishes the step and checkpoints

    def _start_ddp(self) -> None:
        replicas, session = self.replicas, self.session
        t, world_size = session.config.train, replicas.world_size
        if len(session.epochs.sampler) < world_size:
            raise UsageError(
                f"the training data make {len(session.epochs.sampler)} batches an epoch at "
                f"train.max_tokens={t.max_tokens}, fewer than the {world_size} processes; "
                "lower train.max_tokens or start fewer processes"
            )
        if session.device.type not in ("cpu", "cuda"):
            raise UsageError(f"torchrun training runs on cuda or cpu, not {session.device.type}")
        self.module = self._ddp = DistributedDataParallel(
            session.model,
            device_ids=[replicas.local_rank] if session.device.type == "cuda" else None,
            **_NO_BUFFER_SYNC,
        )
        self.stop = AgreedStop()
        log.info(
            "data parallel: %d processes (%s); each optimizer step takes %d processes × %d "
            "accumulated = %d batches of up to %d padded tokens (%d batches an epoch)",
            world_size, replicas.backend, world_size, t.accumulate, world_size * t.accumulate,
            t.max_tokens, len(session.epochs.sampler),
        )  # fmt: skip

    @property
    def is_main(self) -> bool:
        return self.replicas.is_main

    def shard(self, batches: list[list[int]], position: int) -> tuple[list[list[int]], int]:
        """See `shard`; logs when the end of an epoch is left out."""
        r, t = self.replicas, self.session.config.train
        group, consumed = shard(
            batches, position, accumulate=t.accumulate, rank=r.rank, world_size=r.world_size
        )
        if not group and not self._told_tail:
            self._told_tail = True
            log.info("the last %d batch(es) of an epoch are left out so that each of the %d "
                     "processes gets one", consumed, r.world_size)  # fmt: skip
        return group, consumed

    def begin_step(self, step: int) -> None:
        """Under torchrun, give this process its own dropout stream for `step`."""
        if self.replicas.active:
            key = f"tfm-step:{self.session.config.train.seed}:{step}:{self.replicas.rank}"
            seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
            torch.manual_seed(seed % 2**63)

    def sum(self, value: Number) -> Number:
        """`value` summed over all processes (an int stays an int; a tensor is summed on its
        device, without waiting for it)."""
        if not self.replicas.active:
            return value
        if isinstance(value, torch.Tensor):
            dist.all_reduce(value)
            return value
        dtype = torch.int64 if isinstance(value, int) else torch.float64
        total = torch.tensor([value], dtype=dtype, device=self.replicas.device)
        dist.all_reduce(total)
        return type(value)(total.item())

    def close(self) -> None:
        """Drop the DDP wrapper, whose reducer holds the process group: torn down in the
        reverse order of set-up, before the group is destroyed (`process_group`)."""
        self.module = self.session.model
        if self.replicas.active:
            del self._ddp

    def gradient_sync(self, *, last: bool) -> contextlib.AbstractContextManager:
        """Accumulate locally; average gradients over processes in the step's last backward."""
        if self.replicas.active and not last:
            return self._ddp.no_sync()
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of a loss already divided by the step's global token count."""
        if self.replicas.active:
            loss = loss * self.replicas.world_size  # DDP averages gradients; we want their sum
        loss.backward()

    def agree(self, out_of_time: bool) -> bool:
        """Share stop requests and the time budget: True when any process is out of time."""
        if not self.replicas.active:
            return out_of_time
        return bool(self._agree_with(int(out_of_time)))

    def largest(self, value: float) -> float:
        """`value`'s largest over all processes: a time every process then plans with."""
        if not self.replicas.active:
            return value
        values = torch.tensor([value], dtype=torch.float64, device=self.replicas.device)
        dist.all_reduce(values, op=dist.ReduceOp.MAX)
        return float(values.item())

    def share_plan(self, progress: Progress) -> None:
        """Give every process process 0's re-planned length (`Progress.plan`)."""
        plan = progress.plan
        if not self.replicas.active or plan is None:
            return
        fields = [plan.end, plan.decay_from, plan.decay_done, plan.checkpoint_every or 0,
                  plan.cooling]  # fmt: skip
        values = torch.tensor(fields, dtype=torch.float64, device=self.replicas.device)
        dist.broadcast(values, src=0)
        end, start, done, every, cooling = values.tolist()
        progress.plan = StepPlan(int(end), int(start), done, int(every) or None, bool(cooling))

    def validate(self) -> bool:
        """Validate and checkpoint on process 0; True when early stopping says stop."""
        session = self.session
        if not self.replicas.active:
            return validate_and_checkpoint(session)
        early = False
        if self.is_main:
            early = validate_and_checkpoint(session)
        else:
            session.validated_step = session.saved_step = session.progress.step
        return bool(self._agree_with(int(early)))

    def checkpoint(self) -> None:
        """Save an unscored checkpoint (no validation) on process 0: material for averaging."""
        if self.is_main:
            self.session.save_checkpoint(score=None)
        else:
            self.session.saved_step = self.session.progress.step

    def wait_for_main(self) -> None:
        """Under torchrun, return only when process 0 has written its last checkpoint."""
        if self.replicas.active:
            dist.barrier()

    def _agree_with(self, flag: int) -> int:
        """All-reduce (max) this process's stop signal and `flag`; update `stop`; the max flag."""
        local = self._local_stop.signal_name
        signum = signal.Signals[local].value if local else 0
        values = torch.tensor([signum, flag], dtype=torch.int64, device=self.replicas.device)
        dist.all_reduce(values, op=dist.ReduceOp.MAX)
        signum, flag = (int(v) for v in values.tolist())
        if signum and not self.stop.requested:
            self.stop.signal_name = signal.Signals(signum).name
        return flag

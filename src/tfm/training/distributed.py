"""Data-parallel training under `torchrun`: one process per device, DistributedDataParallel.

`torchrun --nproc_per_node=N -m tfm train --config X` starts N copies of the ordinary command;
each finds RANK, LOCAL_RANK and WORLD_SIZE in its environment, joins a process group (NCCL on
CUDA GPUs, Gloo on CPU) and trains a replica of the model. Without torchrun (WORLD_SIZE unset
or 1) nothing here does anything and training is exactly the single-process loop. This module
starts the processes' run; `data_parallel.DataParallel` is what the loop asks of the others.

- Sharding. An optimizer step consumes `W × accumulate` consecutive batches of the epoch's one
  global batch list (`sampler.epoch(e)`, a pure function of seed and epoch); process r takes
  batches r, r + W, r + 2W, … of them. `Progress.position` therefore stays an index into the
  global list, and a checkpoint written by N processes resumes with M: the next step starts at
  the same global batch, only cut into M shares. When fewer than W batches are left at the end
  of an epoch, they are left out (at most W - 1 an epoch), so that every process does the same
  number of steps.
- Loss. Each process divides its summed token loss by the number of real target tokens of the
  whole step, summed over all processes, and scales it by W because DDP averages gradients: the
  update equals one process's update on the union of the step's batches, however the tokens
  fall across processes.
- Agreement. Collectives hang unless all processes make the same calls, so every decision that
  ends or skips something is shared: the non-finite check reads the summed loss and the norm of
  the already averaged gradients; a stop request (signal on any process) and the time budget are
  combined with an all-reduce after each step, so all processes stop after the same one.
- One writer. Process 0 holds the run directory's lock, prepares the run directory, writes
  checkpoints, metrics and the progress bar, and validates alone while the others wait (at most
  `TIMEOUT`); it shares its early-stopping decision. The others read the tokenizer and checkpoint
  it wrote and log warnings only.
- A process that dies (killed, out of memory) breaks the collectives: each survivor stops with one
  line saying so and how to resume; the checkpoints written so far are intact.
- Dropout. Under torchrun each process reseeds torch's generator at every step from (seed, step,
  rank), so processes draw different masks and a resumed run draws the same ones again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from tfm.config import Config
from tfm.data.tokenizer import Tokenizer
from tfm.errors import TfmError, TrainingError, UsageError
from tfm.logs import quieted
from tfm.rundir.lock import run_lock
from tfm.rundir.manifest import TOKENIZER_FILE
from tfm.training.session import Session
from tfm.training.session_opening import open_session

log = logging.getLogger(__name__)

TIMEOUT = timedelta(minutes=60)  # longest wait in a collective, e.g. for process 0's validation


@dataclass(frozen=True)
class Replicas:
    """Where this process stands among those torchrun started; one process by default."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str = "none"

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def device(self) -> torch.device:
        """Where this process's collective tensors live (NCCL only reduces CUDA tensors)."""
        if self.backend == "nccl":
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")


def from_environment(environ: dict[str, str] | None = None) -> Replicas:
    """RANK, LOCAL_RANK and WORLD_SIZE as torchrun sets them; one process when they are absent."""
    env = os.environ if environ is None else environ
    world_size = int(env.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Replicas()
    rank, local_rank = int(env["RANK"]), int(env.get("LOCAL_RANK", env["RANK"]))
    return Replicas(rank=rank, world_size=world_size, local_rank=local_rank)


@contextlib.contextmanager
def said_once() -> Iterator[None]:
    """Under torchrun, only process 0 logs what is said inside: for work that every process does
    the same before the group is joined (reading the config), whose warnings would otherwise
    come once per process. Errors are still raised everywhere."""
    with quieted("tfm", when=not from_environment().is_main):
        yield


@contextlib.contextmanager
def process_group(config: Config) -> Iterator[Replicas]:
    """Join torchrun's process group for the duration of a run (nothing to join without it),
    with the run directory locked by process 0 (`tfm.rundir.lock`)."""
    replicas = from_environment()
    if not replicas.active:
        with run_lock(Path(config.run_dir)):
            yield replicas
        return
    use_cuda = config.train.device in ("auto", "cuda") and torch.cuda.is_available()
    if use_cuda:
        if replicas.local_rank >= torch.cuda.device_count():
            raise UsageError(
                f"process with LOCAL_RANK={replicas.local_rank} has no GPU: this machine has "
                f"{torch.cuda.device_count()}; start at most that many with --nproc_per_node"
            )
        torch.cuda.set_device(replicas.local_rank)  # so that device "cuda" means this one
    elif config.train.device == "mps":
        raise UsageError("torchrun training runs on CUDA (NCCL) or CPU (Gloo), not on mps")
    replicas = Replicas(**{**replicas.__dict__, "backend": "nccl" if use_cuda else "gloo"})
    dist.init_process_group(
        replicas.backend, rank=replicas.rank, world_size=replicas.world_size, timeout=TIMEOUT
    )
    if not replicas.is_main:  # one voice: the others only speak up when something is wrong
        logging.getLogger("tfm").setLevel(logging.WARNING)
    try:
        with _locked_by_main(replicas, config), _peers_lost(replicas, config):
            yield replicas
    finally:
        dist.destroy_process_group()


@contextlib.contextmanager
def _locked_by_main(replicas: Replicas, config: Config) -> Iterator[None]:
    """Process 0 holds the run directory's lock; if it cannot, every process stops."""
    with contextlib.ExitStack() as stack:
        error = None
        if replicas.is_main:
            try:
                stack.enter_context(run_lock(Path(config.run_dir)))
            except TfmError as exc:
                error = exc
        if not _all_true(replicas, error is None):
            raise error or TfmError(f"process 0 could not lock {config.run_dir}; see its error")
        yield


@contextlib.contextmanager
def _peers_lost(replicas: Replicas, config: Config) -> Iterator[None]:
    """A collective that fails because another process died becomes one TrainingError line."""
    try:
        yield
    except RuntimeError as exc:
        text = str(exc)
        lost = isinstance(exc, _DIST_ERRORS) or any(m in text for m in _LOST_PEER_MARKERS)
        if not lost:
            raise
        reason = next((m for m in _LOST_PEER_MARKERS[2:] if m in text), "a collective failed")
        resume = shlex.quote(str(Path(config.run_dir) / "config.yaml"))
        raise TrainingError(
            f"process {replicas.rank} of {replicas.world_size} lost contact with the other "
            f"training processes ({reason}: one of them stopped or crashed; see its log); the "
            f"checkpoints written so far are intact: resume with `torchrun "
            f"--nproc_per_node={replicas.world_size} -m tfm train --config {resume} --resume`"
        ) from exc


_DIST_ERRORS = tuple(
    getattr(dist, name) for name in ("DistError", "DistBackendError") if hasattr(dist, name)
)
_LOST_PEER_MARKERS = ("gloo", "NCCL", "Connection reset by peer", "Connection closed by peer",
                      "Broken pipe", "Timed out")  # fmt: skip


def open_session_everywhere(
    replicas: Replicas,
    config: Config,
    *,
    resume: bool,
    overwrite: bool,
    tokenizer: Tokenizer | None = None,
    plan_notes: dict | None = None,
) -> Session:
    """Process 0 prepares the run directory (and tokenizer); then the others read it, which they
    can only where it is on a file system every node sees: a process that does not find the
    tokenizer there, or finds another run (another tokenizer, another checkpoint's step), stops
    every process with one line saying so."""
    if not replicas.active:
        return open_session(config, resume=resume, overwrite=overwrite, tokenizer=tokenizer,
                            plan_notes=plan_notes)  # fmt: skip
    session = None
    for turn in ("main", "others"):
        failure = None
        if (turn == "main") == replicas.is_main:
            try:
                session = _open_here(replicas, config, resume=resume, overwrite=overwrite,
                                     tokenizer=tokenizer, plan_notes=plan_notes)  # fmt: skip
            except Exception as exc:  # shared first, so that no process waits forever
                failure = exc
        _agree(replicas, failure, config)
    assert session is not None
    differs = not _same_as_main(replicas, session)
    elsewhere = _NotShared(_not_seen(replicas, config, "another run is there"))
    _agree(replicas, elsewhere if differs else None, config)
    return session


def _open_here(
    replicas: Replicas,
    config: Config,
    *,
    resume: bool,
    overwrite: bool,
    tokenizer: Tokenizer | None = None,
    plan_notes: dict | None = None,
) -> Session:
    if not replicas.is_main and not (Path(config.run_dir) / TOKENIZER_FILE).is_file():
        raise _NotShared(_not_seen(replicas, config, f"no {TOKENIZER_FILE} there"))
    return open_session(config, resume=resume, overwrite=overwrite, rank=replicas.rank,
                        world_size=replicas.world_size, tokenizer=tokenizer,
                        plan_notes=plan_notes)  # fmt: skip


# What torchrun across machines needs of the run directory, in every message that it is missing.
SHARED = (
    "torchrun on several machines needs run_dir on a file system every node sees (a shared "
    "mount), at the same path in each node's config"
)


class _NotShared(UsageError):
    """A process that does not see the run directory process 0 prepared."""


def _not_seen(replicas: Replicas, config: Config, why: str) -> str:
    return (f"process {replicas.rank} of {replicas.world_size} does not see the run directory "
            f"{config.run_dir} that process 0 prepared ({why}): {SHARED}")  # fmt: skip


def _agree(replicas: Replicas, failure: Exception | None, config: Config) -> None:
    """Every process learns whether all are well (None) and stops if not: raising its own
    failure, or saying what another's was (the run directory unseen, or another error)."""
    mine = 2 if failure is None else 1 if isinstance(failure, _NotShared) else 0
    worst = torch.tensor([mine], device=replicas.device)
    dist.all_reduce(worst, op=dist.ReduceOp.MIN)
    if worst.item() == 2:
        return
    if failure is not None:
        raise failure
    if worst.item() == 1:
        raise UsageError(f"another process does not see the run directory {config.run_dir} "
                         f"that process 0 prepared: {SHARED}")  # fmt: skip
    raise TfmError(f"another process could not open {config.run_dir}; see its error")


def _same_as_main(replicas: Replicas, session: Session) -> bool:
    """Whether this process opened the run process 0 opened: the same tokenizer, step and
    checkpoint file (its size and time of writing, which a file system every node sees shows
    alike; a copy of the run on each node may differ, and is refused)."""
    checkpoint = session.resumed_from.stat() if session.resumed_from else None
    written = (checkpoint.st_size, checkpoint.st_mtime_ns) if checkpoint else (0, 0)
    opened = [int(session.tokenizer.fingerprint()[:15], 16), session.progress.step, *written]
    mine = torch.tensor(opened, dtype=torch.int64, device=replicas.device)
    main = mine.clone()
    dist.broadcast(main, src=0)
    return torch.equal(mine, main)


def _all_true(replicas: Replicas, value: bool) -> bool:
    flag = torch.tensor([int(value)], device=replicas.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())

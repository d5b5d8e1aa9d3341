"""Opening a training session: the run directory, device, plan, data, model and optimizer of a
new run, or of a run that goes on from its checkpoint (`restore`: the resume policy's verdict,
then the model, optimizer, progress, clock and random state as they were).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import torch

from tfm.config import Config, planned
from tfm.data.cache.prepared_cache import training_splits
from tfm.data.epochs import EpochPlan
from tfm.data.pipeline import check_splits, related_validations
from tfm.data.related import mix_record
from tfm.data.tokenizer import PAD_ID, Tokenizer
from tfm.device import precision_name, select_device, training_precision
from tfm.errors import UsageError
from tfm.logs import quieted
from tfm.rundir.manifest import TOKENIZER_FILE, check_manifest, record_manifest
from tfm.rundir.paths import RunPaths
from tfm.rundir.store import CheckpointStore, LoadedCheckpoint
from tfm.threads import use_threads
from tfm.training.recipe.memory import check_fits
from tfm.training.resume_policy import OPTIMIZER_KEYS, RunIdentity, judge_resume, optimizer_changes
from tfm.training.run_log import start_run_log
from tfm.training.run_plan import resumed_clock, starting_plan, write_plan
from tfm.training.run_preparation import check_run_dir, create_run_dir, record_opened_run
from tfm.training.schedule import build_optimizer
from tfm.training.session import Session
from tfm.training.start_log import log_start
from tfm.training.state import Progress, restore_rng_state
from tfm.training.tensorboard import open_tensorboard
from tfm.training.utilisation import describe as describe_flops
from tfm.transformer import ModelArgs, build_model

log = logging.getLogger(__name__)


def reads_each_step(device: torch.device) -> bool:
    """Whether training reads each step's outcome as it ends: not on CUDA, whose kernels run
    behind the host and would be waited for; on the CPU the value is already there."""
    return device.type != "cuda"


def model_args(config: Config, tokenizer: Tokenizer) -> ModelArgs:
    """The model's shape: the config's model section, with the tokenizer's vocabulary sizes."""
    return ModelArgs.from_config(
        config.model,
        src_vocab_size=tokenizer.src_vocab_size,
        tgt_vocab_size=tokenizer.tgt_vocab_size,
        pad_id=PAD_ID,
    )


@contextlib.contextmanager
def _out_of_memory_refused(device: torch.device) -> Iterator[None]:
    """An allocation that fails while the model is built is one line (the estimate of
    `check_fits` let it through: another process took the memory meanwhile)."""
    try:
        yield
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        if not isinstance(exc, torch.OutOfMemoryError) and "alloc" not in str(exc):
            raise
        cause = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise UsageError(
            f"the model does not fit in the memory available on {device} ({cause}); use a "
            "smaller model or free some memory"
        ) from None


def open_session(
    config: Config,
    *,
    resume: bool,
    overwrite: bool,
    rank: int = 0,
    world_size: int = 1,
    tokenizer: Tokenizer | None = None,
    plan_notes: dict | None = None,
) -> Session:
    """Check the run directory, device, data and memory, build the model and optimizer, then
    prepare the run directory (nothing is written or removed there before); restore the model
    and optimizer when resuming.

    Under torchrun, process `rank` > 0 writes nothing: it reads the run directory (tokenizer,
    checkpoint) that process 0 has prepared before it. A new run trains with `tokenizer` where
    one is given, and keeps `plan_notes` in its plan.json.
    """
    paths = RunPaths(Path(config.run_dir))
    writer = rank == 0
    checkpoint = check_run_dir(paths, config, resume=resume, overwrite=overwrite, writer=writer)
    check_splits(config.data, ("train", "validation"))  # before either is read or timed
    device = select_device(config.train.device)
    use_threads(config.train.threads)
    dtype = training_precision(config.train.precision, device)
    log.info("precision: %s (train.precision %s) on %s", precision_name(dtype),
             config.train.precision, device.type)  # fmt: skip
    if checkpoint or not writer:
        check_manifest(paths.root, [TOKENIZER_FILE])
        tokenizer = Tokenizer.load(paths.root)
    start = starting_plan(config, paths, checkpoint=checkpoint, device=device, dtype=dtype,
                          tokenizer=tokenizer, world_size=world_size, writer=writer,
                          notes=plan_notes)  # fmt: skip
    config = start.config
    with quieted("tfm.data", when=not writer):  # under torchrun, process 0 says it once
        splits, tokenizer, data_fingerprint = training_splits(
            config, tokenizer=tokenizer, entry=start.entry, validation=start.validation
        )
    log_start(config, splits["train"], tokenizer)
    args = model_args(config, tokenizer)
    check_fits(args, planned(config.train.max_tokens, "train.max_tokens"), device)
    torch.manual_seed(config.train.seed)
    with _out_of_memory_refused(device):
        model = build_model(args).to(device)
        optimizer = build_optimizer(model, config)
    log.info("model: %s parameters", f"{sum(q.numel() for q in model.parameters()):,}")
    log.info("%s", describe_flops(args, device, dtype))
    epochs = EpochPlan.from_config(config, splits["train"])
    if not checkpoint and writer:  # config, device, data and memory are good: now the directory
        create_run_dir(paths, config)
        if mix := mix_record(config.data, splits["train"].report):
            start.notes["mix"] = mix  # the related pairs' corpora, as an epoch reads them
        write_plan(paths, start)
        tokenizer.save(paths.root)
        record_manifest(paths.root)
    session = Session(
        config=config,
        paths=paths,
        device=device,
        dtype=dtype,
        tokenizer=tokenizer,
        validation_split=splits["validation"],
        model=model,
        model_args=args,
        optimizer=optimizer,
        epochs=epochs,
        store=CheckpointStore(
            paths.checkpoints,
            keep_last=planned(config.train.keep_last, "train.keep_last"),
            keep_best=config.train.keep_best,
            mode="max",
        ),
        data_fingerprint=data_fingerprint,
        world_size=world_size,
        read_each_step=reads_each_step(device),
    )
    if writer:  # process 0 validates
        report = splits["train"].report
        session.related_validations = related_validations(config.data, tokenizer, report)
    session.progress.clock = start.clock
    if checkpoint:
        restore(session, checkpoint)
    if writer:
        resumed_at = session.progress.step if checkpoint else None
        record_opened_run(paths, session.config, resumed_at=resumed_at)
        start_run_log(paths.root)
        session.tensorboard = open_tensorboard(
            paths.root, enabled=config.train.tensorboard, resumed_at=resumed_at
        )
    return session


def restore(session: Session, checkpoint: LoadedCheckpoint) -> None:
    """Continue from `checkpoint`, or raise UsageError when the resume policy refuses it."""
    path, state = checkpoint.path, checkpoint.state
    data_fingerprint = state["data_fingerprint"]
    if (
        data_fingerprint != session.data_fingerprint
        and data_fingerprint == session.epochs.fingerprint()
    ):
        data_fingerprint = session.data_fingerprint  # written before the data cache named the data
    stored = RunIdentity(
        config=state["config"],
        tokenizer_fingerprint=state["tokenizer_fingerprint"],
        data_fingerprint=data_fingerprint,
        world_size=state.get("world_size", 1),
    )
    verdict = judge_resume(
        stored, session.identity(), progress=state["progress"], checkpoint=str(path)
    )
    if verdict.refusal:
        raise UsageError(verdict.refusal)
    session.model.load_state_dict(state["model"])
    session.optimizer.load_state_dict(state["optimizer"])
    changes = optimizer_changes(state["config"], session.identity().config)
    _apply_optimizer_settings(session, changes)
    session.progress = Progress.from_dict(state["progress"])
    _follow_resumed_budget(session, state["config"])
    restore_rng_state(state["rng"])
    session.saved_step = session.validated_step = session.progress.step
    session.saved_epoch, session.saved_score = session.progress.epoch, state.get("score")
    session.resumed_from = path
    log.info("resumed from %s at step %d (epoch %d, batch %d)", path, session.progress.step,
             session.progress.epoch, session.progress.position)  # fmt: skip
    for level, message in verdict.notes:
        log.log(level, message)


def _follow_resumed_budget(session: Session, stored: dict) -> None:
    """Keep, re-plan or end the clock the checkpoint saved, for the budgets this resume
    gives (`run_plan.resumed_clock`)."""
    if note := resumed_clock(session.config, stored, session.progress):
        log.info("%s", note)
    session.clock.restart(session.progress.elapsed_s)
    clock, minutes = session.progress.clock, session.config.train.max_minutes
    if clock is not None and minutes is not None and minutes * 60 != clock.budget_s:
        why = f"train.max_minutes changes from {clock.budget_s / 60:g} to {minutes:g}: "
        session.clock.replan(elapsed=session.progress.elapsed_s, budget_s=minutes * 60, why=why)


def _apply_optimizer_settings(session: Session, changes: list[tuple[str, object, object]]) -> None:
    """Put the config's AdamW settings into the optimizer restored from a checkpoint (which
    holds the values the run had) and log each of `changes` (key, was, now)."""
    t = session.config.train
    for group in session.optimizer.param_groups:
        group.update(betas=tuple(t.betas), eps=t.eps, weight_decay=t.weight_decay)
    for key, was, now in changes:
        where = "in the optimizer" if key in OPTIMIZER_KEYS else "in the schedule"
        log.info("train.%s changes from %s to %s with this resume (%s)", key, was, now, where)

"""A training session: the run directory, data, model, optimizer and their saving and restoring."""

from __future__ import annotations

import logging
import shutil
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from pydantic import ValidationError

from tfm.config import Config, removed_settings, to_yaml, without_removed_keys
from tfm.data.batching import EpochData, TokenBatchSampler
from tfm.data.bidirectional import both_directions
from tfm.data.bpe_dropout import DropoutEpochs
from tfm.data.cache import training_splits
from tfm.data.cache_key import legacy_fingerprint
from tfm.data.pipeline import EncodedSplit
from tfm.data.ragged import lengths_of
from tfm.data.tokenizer import PAD_ID, Tokenizer
from tfm.device import autocast, resolve_precision, select_device
from tfm.diagnostics import degenerate_warnings
from tfm.errors import UsageError
from tfm.evaluation import DecodeSettings, evaluate_split
from tfm.rundir.atomic import atomic_write_text
from tfm.rundir.metrics import append_event, read_metrics, truncate_metrics
from tfm.rundir.model_file import on_cpu, save_model
from tfm.rundir.paths import RunPaths, remember_run
from tfm.rundir.store import CheckpointStore, LoadedCheckpoint, finite_score
from tfm.training.schedule import build_optimizer
from tfm.training.state import Progress, restore_rng_state, rng_state
from tfm.transformer import ModelArgs, Transformer, build_model

log = logging.getLogger(__name__)

# Keys that may differ between a run and its resumption; anything else in these sections may not.
# train.accumulate may change (the data position counts batches); `_log_new_batching` says so.
# train.bidirectional_epochs decides what an epoch's batches are too, but may change for the epochs
# not yet begun; `_bidirectional_change_rewrites_the_past` checks it.
FIXED_TRAIN_KEYS = ("seed", "max_tokens")
SPLITS = ("train", "validation", "test")
_SPLIT_CHANGE = {
    "train": ": resuming, as its content is the same",
    "validation": ": validation scores from here on are on the new split",
    "test": "",
}


@dataclass
class StopFlag:
    """Set by a signal handler; the loop finishes its step, checkpoints and returns."""

    signal_name: str | None = None

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def request(self, signum: int) -> None:
        self.signal_name = signal.Signals(signum).name


@dataclass
class Session:
    config: Config
    paths: RunPaths
    device: torch.device
    dtype: torch.dtype
    tokenizer: Tokenizer
    train_split: EncodedSplit
    validation_split: EncodedSplit
    model: Transformer
    model_args: ModelArgs
    optimizer: torch.optim.Optimizer
    sampler: TokenBatchSampler
    store: CheckpointStore
    data_fingerprint: str
    world_size: int = 1  # processes training together (torchrun); see training/distributed.py
    progress: Progress = field(default_factory=Progress)
    saved_step: int = -1
    validated_step: int = -1
    resumed_from: Path | None = None
    warned_at: dict[str, int] = field(default_factory=dict)  # finding kind -> step of its advice
    bpe_dropout: DropoutEpochs | None = None  # tokenizer.bpe_dropout > 0: new segments an epoch
    _epoch: tuple[int, EpochData] | None = field(default=None, repr=False)  # the last one built

    def epoch_data(self, epoch: int) -> EpochData:
        """Epoch `epoch`'s training ids and batches: the split as encoded, or re-segmented, and
        in the first `train.bidirectional_epochs` epochs each pair reversed as well. The last
        epoch built is kept: the progress total and the loop both ask for the first one."""
        if self._epoch is not None and self._epoch[0] == epoch:
            return self._epoch[1]
        t = self.config.train
        if self.bpe_dropout is not None:
            data = self.bpe_dropout.epoch(epoch)
        else:
            split = self.train_split
            data = EpochData(src=split.src, tgt=split.tgt, batches=self.sampler.epoch(epoch))
        if epoch < t.bidirectional_epochs:
            data = both_directions(data, seed=t.seed, epoch=epoch, max_tokens=t.max_tokens)
        self._epoch = (epoch, data)
        return data

    def autocast(self):
        return autocast(self.device, self.dtype)

    def write_metrics(self, event: dict) -> None:
        append_event(self.paths.metrics, event)

    def state(self) -> dict:
        return {
            "kind": "train_state",
            "model": on_cpu(self.model.state_dict()),
            "optimizer": self.optimizer.state_dict(),
            "progress": self.progress.to_dict(),
            "rng": rng_state(),
            "config": self.config.model_dump(mode="json"),
            "model_args": asdict(self.model_args),
            "tokenizer_fingerprint": self.tokenizer.fingerprint(),
            "data_fingerprint": self.data_fingerprint,
            "world_size": self.world_size,
        }

    def save_checkpoint(self, score: float | None) -> None:
        """Write the full training state and last.pt (both atomically)."""
        state = self.state()
        self.store.save(state, step=self.progress.step, score=score, protect=self.resumed_from)
        self._save_model(self.paths.last)
        self.saved_step = self.progress.step

    def _save_model(self, path: Path) -> None:
        save_model(
            path,
            self.model,
            asdict(self.model_args),
            step=self.progress.step,
            tokenizer_fingerprint=self.tokenizer.fingerprint(),
        )

    def validate_and_checkpoint(self) -> bool:
        """Validate, log, keep best.pt and a checkpoint; True when early stopping says stop."""
        t, p = self.config.train, self.progress
        settings = DecodeSettings.from_config(self.config.decoding, self.device, self.dtype)
        scores, hypotheses = evaluate_split(
            self.model, self.tokenizer, self.validation_split, settings
        )
        self.validated_step = p.step
        event = {
            "step": p.step,
            "val_loss": scores["loss"],
            "val_ppl": scores["perplexity"],
            "val_bleu": scores["bleu"],
            "val_bleu_lowercase": scores["bleu_lowercase"],
            "val_chrf": scores["chrf"],
            "val_length_ratio": scores["length_ratio"],  # hypothesis / reference tokens
        }
        self.write_metrics(event)
        log.info(
            "step %d validation: loss %.3f, ppl %.2f, BLEU %.2f, chrF %.2f, length ratio %s",
            p.step, event["val_loss"], event["val_ppl"], event["val_bleu"], event["val_chrf"],
            event["val_length_ratio"],
        )  # fmt: skip
        for i in range(min(t.validation_samples, len(hypotheses))):
            split = self.validation_split
            log.info("  src: %s\n  ref: %s\n  hyp: %s", split.src_text[i], split.tgt_text[i],
                     hypotheses[i])  # fmt: skip
        for finding in degenerate_warnings(hypotheses, read_metrics(self.paths.metrics)):
            if finding.kind in self.warned_at:  # the advice was given once; say it persists
                log.warning("step %d: still %s (advice at step %d)", p.step, finding.seen,
                            self.warned_at[finding.kind])  # fmt: skip
            else:
                log.warning("step %d: %s", p.step, finding)
                self.warned_at[finding.kind] = p.step
        metric = t.early_stopping_metric
        score = finite_score(-scores["loss"] if metric == "loss" else scores[metric])
        if score is not None and (p.best_score is None or score > p.best_score):
            p.best_score, p.best_step, p.validations_without_gain = score, p.step, 0
            self._save_model(self.paths.best)
        else:
            p.validations_without_gain += 1
        self.save_checkpoint(score)
        return t.patience is not None and p.validations_without_gain >= t.patience


def model_args(config: Config, tokenizer: Tokenizer) -> ModelArgs:
    """The model's shape: the config's model section, with the tokenizer's vocabulary sizes."""
    return ModelArgs.from_config(
        config.model,
        src_vocab_size=tokenizer.src_vocab_size,
        tgt_vocab_size=tokenizer.tgt_vocab_size,
        pad_id=PAD_ID,
    )


def open_session(
    config: Config, *, resume: bool, overwrite: bool, rank: int = 0, world_size: int = 1
) -> Session:
    """Prepare the run directory, data, model and optimizer; restore them when resuming.

    Under torchrun, process `rank` > 0 writes nothing: it reads the run directory (tokenizer,
    checkpoint) that process 0 has prepared before it.
    """
    paths = RunPaths(Path(config.run_dir))
    writer = rank == 0
    checkpoint = _prepare_run_dir(paths, config, resume=resume, overwrite=overwrite, writer=writer)
    device = select_device(config.train.device)
    dtype = resolve_precision(config.train.precision, device)
    tokenizer = Tokenizer.load(paths.root) if checkpoint or not writer else None
    splits, tokenizer, data_fingerprint = training_splits(config, tokenizer=tokenizer)
    if not checkpoint and writer:
        tokenizer.save(paths.root)
    torch.manual_seed(config.train.seed)
    args = model_args(config, tokenizer)
    model = build_model(args).to(device)
    log.info("model: %s parameters", f"{sum(q.numel() for q in model.parameters()):,}")
    train_split = splits["train"]
    session = Session(
        config=config,
        paths=paths,
        device=device,
        dtype=dtype,
        tokenizer=tokenizer,
        train_split=train_split,
        validation_split=splits["validation"],
        model=model,
        model_args=args,
        optimizer=build_optimizer(model, config),
        sampler=TokenBatchSampler(
            lengths_of(train_split.src),
            lengths_of(train_split.tgt),
            max_tokens=config.train.max_tokens,
            seed=config.train.seed,
        ),
        store=CheckpointStore(
            paths.checkpoints,
            keep_last=config.train.keep_last,
            keep_best=config.train.keep_best,
            mode="max",
        ),
        data_fingerprint=data_fingerprint,
        world_size=world_size,
    )
    if config.tokenizer.bpe_dropout > 0:
        session.bpe_dropout = DropoutEpochs(
            train_split,
            tokenizer,
            p=config.tokenizer.bpe_dropout,
            seed=config.train.seed,
            max_tokens=config.train.max_tokens,
            max_length=config.data.max_length,
            sides=config.tokenizer.bpe_dropout_sides,
        )
    if checkpoint:
        _restore(session, checkpoint)
    if writer:
        if checkpoint:
            atomic_write_text(to_yaml(session.config), paths.config)
            truncate_metrics(paths.metrics, session.progress.step)
        remember_run(paths.root)
    return session


def _prepare_run_dir(
    paths: RunPaths, config: Config, *, resume: bool, overwrite: bool, writer: bool = True
):
    """Create or check the run directory; when resuming, return the checkpoint path to load."""
    root = paths.root
    exists = root.exists() and any(root.iterdir())
    if resume:
        store = CheckpointStore(paths.checkpoints, keep_last=1, keep_best=1, mode="max")
        latest = store.latest_loadable() if paths.checkpoints.exists() else None
        if latest is None:
            raise UsageError(f"--resume: no complete checkpoint in {paths.checkpoints}")
        return latest
    if not writer:
        return None
    if exists and not overwrite:
        raise UsageError(
            f"run directory {root} already exists; use --resume to continue it "
            "or --overwrite to start again"
        )
    if exists:
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(to_yaml(config), paths.config)
    return None


def _restore(session: Session, checkpoint: LoadedCheckpoint) -> None:
    path, state = checkpoint.path, checkpoint.state
    _check_consistent(session, state, path)
    session.model.load_state_dict(state["model"])
    session.optimizer.load_state_dict(state["optimizer"])
    session.progress = Progress.from_dict(state["progress"])
    restore_rng_state(state["rng"])
    session.saved_step = session.validated_step = session.progress.step
    session.resumed_from = path
    log.info("resumed from %s at step %d (epoch %d, batch %d)", path, session.progress.step,
             session.progress.epoch, session.progress.position)  # fmt: skip
    _log_new_batching(session, state)


def _log_new_batching(session: Session, state: dict) -> None:
    """Say how a different number of processes or train.accumulate changes the next steps."""
    p, accumulate = session.progress, session.config.train.accumulate
    old_world, old_accumulate = state.get("world_size", 1), state["config"]["train"]["accumulate"]
    if old_world != session.world_size:
        log.info(
            "the checkpoint was written by %d process(es), this run has %d: training goes on at "
            "batch %d of epoch %d's global batch list, now cut into %d shares a step",
            old_world, session.world_size, p.position, p.epoch, session.world_size,
        )  # fmt: skip
    old, new = old_world * old_accumulate, session.world_size * accumulate
    if old != new:
        keep = (f"; train.accumulate={old // session.world_size} keeps it"
                if old % session.world_size == 0 else "")  # fmt: skip
        log.warning(
            "each optimizer step now takes %d process(es) × %d accumulated = %d batches instead "
            "of %d: the effective batch changes%s", session.world_size, accumulate, new, old, keep,
        )  # fmt: skip


def _check_consistent(session: Session, state: dict, path: Path) -> None:
    """Refuse to resume with a different model, tokenizer, data or data order.

    Where the splits are read from may change (data moved, another checkout): the training data
    is compared by content (its fingerprint), and a changed validation or test source is logged.
    """
    old, new = _as_current_schema(state["config"]), session.config.model_dump(mode="json")
    differing = [
        f"{section}.{key}"
        for section in ("data", "tokenizer", "model", "train")
        for key in sorted(set(old[section]) | set(new[section]))
        if (section != "train" or key in FIXED_TRAIN_KEYS)
        and (section != "data" or key not in (*SPLITS, "cache_dir"))
        and old[section].get(key) != new[section].get(key)
    ]
    allowed = "budgets (max_steps, max_epochs, max_minutes, …)"
    if _bidirectional_change_rewrites_the_past(old, new, state):
        differing.append("train.bidirectional_epochs")
        allowed += (
            f", train.bidirectional_epochs to no fewer than the {_begun(state)} epoch(s) begun"
        )
    if state["tokenizer_fingerprint"] != session.tokenizer.fingerprint():
        differing.append("tokenizer.json")
    stored = state["data_fingerprint"]  # a checkpoint from before the data cache: the legacy one
    if stored != session.data_fingerprint and stored != legacy_fingerprint(session.train_split):
        differing.append("training data")
    if differing:
        raise UsageError(
            f"cannot resume from {path}: {', '.join(differing)} differ from the run's; "
            f"change only {allowed} or start a new run"
        )
    for key, value in removed_settings(state["config"]).items():
        if value:  # the option was on
            log.warning("the run trained with %s=%s, which tfm no longer has: it goes on "
                        "without it", key, value)  # fmt: skip
    for split in SPLITS:
        if old["data"].get(split) != new["data"].get(split):
            log.warning(
                "data.%s differs from the run's (%s, now %s)%s", split, old["data"].get(split),
                new["data"].get(split), _SPLIT_CHANGE[split],
            )  # fmt: skip


def _bidirectional_change_rewrites_the_past(old: dict, new: dict, state: dict) -> bool:
    """Whether a new `train.bidirectional_epochs` would change an epoch the run has begun: the
    count may move (say, to end both-ways training early and go on one way) only where every
    begun epoch keeps its kind, i.e. both counts cover all of them."""
    # .get: a config stored by a version without the key (and kept as stored) trained one way
    counts = old["train"].get("bidirectional_epochs", 0), new["train"]["bidirectional_epochs"]
    return counts[0] != counts[1] and min(counts) < _begun(state)


def _begun(state: dict) -> int:
    """How many epochs the checkpoint's run has begun (the one in progress included)."""
    progress = state["progress"]
    return progress["epoch"] + (progress["position"] > 0)


def _as_current_schema(stored: dict) -> dict:
    """A checkpoint's config as this version reads it: a key added since the checkpoint was written
    takes its default, which is what that version did (e.g. `model.activation_dropout` 0.0), and
    a key removed since is dropped."""
    stored = without_removed_keys(stored)
    try:
        return Config.model_validate(stored).model_dump(mode="json")
    except ValidationError:  # a key this version no longer has: compare as stored
        return stored

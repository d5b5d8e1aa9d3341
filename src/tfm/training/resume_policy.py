"""Which changes a resumed run may make, as a function of plain values: the checkpoint's stored
config, progress and fingerprints against the new run's. Nothing here reads files or builds models.

- Refused: any change of the data, tokenizer or model sections (where the splits are read from,
  the data cache and `data.control_chars` excepted), of `train.seed` or `train.max_tokens` (the
  batches), of the tokenizer file or of the training data's content, and a
  `train.bidirectional_epochs` that would change the kind of an epoch the run has begun.
- Allowed and noted: budgets and every other train key (a changed optimizer setting, AdamW's
  betas, eps and weight_decay, is put into the restored optimizer, see `optimizer_changes`); a
  moved training split with the same content; another validation or test split; another number
  of processes or `train.accumulate` (the next steps' batches change).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pydantic import ValidationError

from tfm.config import SPLITS, Config

# Keys that may differ between a run and its resumption; anything else in these sections may not.
# train.accumulate may change (the data position counts batches); `_batching_notes` says so.
# train.bidirectional_epochs decides what an epoch's batches are too, but may change for the epochs
# not yet begun; `_rewrites_begun_epochs` checks it.
FIXED_TRAIN_KEYS = ("seed", "max_tokens")
FREE_DATA_KEYS = (*SPLITS, "cache_dir", "control_chars")  # which files, where cached, how checked
_SPLIT_CHANGE = {
    "train": ": resuming, as its content is the same",
    "validation": ": validation scores from here on are on the new split",
    "test": "",
}


@dataclass(frozen=True)
class RunIdentity:
    """What a checkpoint says about the run that wrote it, or what a new run is: its config (as
    `Config.model_dump(mode="json")`), the fingerprints of its tokenizer and training data, and
    the number of processes training together."""

    config: dict
    tokenizer_fingerprint: str
    data_fingerprint: str
    world_size: int = 1


@dataclass(frozen=True)
class ResumeVerdict:
    """`refusal`: the one-line reason the run may not resume, or None; `notes`: (logging level,
    message) pairs to log when it does."""

    refusal: str | None = None
    notes: list[tuple[int, str]] = field(default_factory=list)


def judge_resume(
    stored: RunIdentity, new: RunIdentity, *, progress: dict, checkpoint: str
) -> ResumeVerdict:
    """Whether the run `stored` describes (at `progress`, a `Progress.to_dict()`, saved in the file
    `checkpoint`) may go on as `new`."""
    old, current = as_current_schema(stored.config), new.config
    differing = [
        f"{section}.{key}"
        for section in ("data", "tokenizer", "model", "train")
        for key in sorted(set(old[section]) | set(current[section]))
        if (section != "train" or key in FIXED_TRAIN_KEYS)
        and (section != "data" or key not in FREE_DATA_KEYS)
        and old[section].get(key) != current[section].get(key)
    ]
    allowed = "budgets (max_steps, max_epochs, max_minutes, …)"
    if _rewrites_begun_epochs(old, current, progress):
        differing.append("train.bidirectional_epochs")
        allowed += (
            f", train.bidirectional_epochs to no fewer than the {begun(progress)} epoch(s) begun"
        )
    if stored.tokenizer_fingerprint != new.tokenizer_fingerprint:
        differing.append("tokenizer.json")
    if stored.data_fingerprint != new.data_fingerprint:
        differing.append("training data")
    if differing:
        return ResumeVerdict(
            refusal=f"cannot resume from {checkpoint}: {', '.join(differing)} "
            f"{'differs' if len(differing) == 1 else 'differ'} from the run's; change only "
            f"{allowed} or start a new run"
        )
    notes: list[tuple[int, str]] = []
    for split in SPLITS:
        was, now = old["data"].get(split), current["data"].get(split)
        if was != now:
            notes.append((logging.WARNING, f"data.{split} differs from the run's ({was}, now "
                                           f"{now}){_SPLIT_CHANGE[split]}"))  # fmt: skip
    return ResumeVerdict(notes=notes + _batching_notes(stored, new, progress))


OPTIMIZER_KEYS = ("betas", "eps", "weight_decay")  # AdamW's own settings, in its param groups
SCHEDULE_KEYS = ("lr", "warmup_steps")  # the §5.3 schedule sets the rate before every step


def optimizer_changes(stored: dict, new: dict) -> list[tuple[str, object, object]]:
    """The optimizer and schedule keys of the train section that a resumed run changes, as
    (key, stored value, new value): the optimizer's state comes from the checkpoint, so the
    session must put the new values into it (`session_opening.restore`); the schedule reads its keys
    from the config at every step."""
    old, current = as_current_schema(stored)["train"], new["train"]
    return [
        (key, old.get(key), current[key])
        for key in (*OPTIMIZER_KEYS, *SCHEDULE_KEYS)
        if old.get(key) != current[key]
    ]


def _batching_notes(stored: RunIdentity, new: RunIdentity, progress: dict) -> list[tuple[int, str]]:
    """How a different number of processes or train.accumulate changes the next steps."""
    notes = []
    old_world, world = stored.world_size, new.world_size
    old_accumulate = stored.config["train"].get("accumulate", 1)
    accumulate = new.config["train"]["accumulate"]
    if old_world != world:
        notes.append((logging.INFO, (
            f"the checkpoint was written by {old_world} process(es), this run has {world}: "
            f"training goes on at batch {progress['position']} of epoch {progress['epoch']}'s "
            f"global batch list, now cut into {world} shares a step"
        )))  # fmt: skip
    old, current = old_world * old_accumulate, world * accumulate
    if old != current:
        keep = f"; train.accumulate={old // world} keeps it" if old % world == 0 else ""
        notes.append((logging.WARNING, (
            f"each optimizer step now takes {world} process(es) × {accumulate} accumulated = "
            f"{current} batches instead of {old}: the effective batch changes{keep}"
        )))  # fmt: skip
    return notes


def _rewrites_begun_epochs(old: dict, new: dict, progress: dict) -> bool:
    """Whether a new `train.bidirectional_epochs` would change an epoch the run has begun: the
    count may move (say, to end both-ways training early and go on one way) only where every
    begun epoch keeps its kind, i.e. both counts cover all of them."""
    # .get: a config stored by a version without the key (and kept as stored) trained one way
    counts = old["train"].get("bidirectional_epochs", 0), new["train"]["bidirectional_epochs"]
    return counts[0] != counts[1] and min(counts) < begun(progress)


def begun(progress: dict) -> int:
    """How many epochs a run at `progress` has begun (the one in progress included)."""
    return progress["epoch"] + (progress["position"] > 0)


def as_current_schema(stored: dict) -> dict:
    """A checkpoint's config as this version reads it: a key added since the checkpoint was written
    takes its default, which is what that version did (e.g. `model.activation_dropout` 0.0)."""
    try:
        return Config.model_validate(stored).model_dump(mode="json")
    except ValidationError:  # a key this version no longer has: compare as stored
        return stored

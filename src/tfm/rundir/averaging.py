"""Checkpoint averaging: the element-wise mean of the weights of several checkpoints of one run.

§6.1 averages the last 5 (base) or 20 (big) checkpoints. The result is a normal run directory
(config, tokenizer, `best.pt` = the average) that `tfm eval` and `tfm translate` accept.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path

import torch

from tfm.atomic import atomic_copy
from tfm.errors import CheckpointError, UsageError
from tfm.rundir.checkpoint import load_checkpoint
from tfm.rundir.integrity import first_non_finite
from tfm.rundir.manifest import COVERED, record_manifest
from tfm.rundir.model_file import save_weights, tie_key
from tfm.rundir.paths import RunPaths
from tfm.rundir.store import MODEL_KIND, CheckpointStore
from tfm.transformer import ModelArgs

log = logging.getLogger(__name__)


def average_checkpoints(
    paths: RunPaths, out: Path, *, last: int | None = None, best: int | None = None
) -> Path:
    """Average the `last` newest or `best` best checkpoints of a run into a new run dir `out`."""
    if (last is None) == (best is None):
        raise UsageError("give exactly one of --last N or --best N")
    count = last if last is not None else best
    assert count is not None  # exactly one of the two, checked above
    store = CheckpointStore(paths.checkpoints)
    chosen = store.newest(count) if last is not None else store.top(count)
    if len(chosen) < count:
        raise UsageError(
            f"{paths.checkpoints} holds {len(chosen)} usable checkpoint(s), fewer than {count}; "
            "a run has one at each validation and every train.checkpoint_every steps, of which "
            "it keeps train.keep_last (and train.keep_best best): train with checkpoints close "
            "together at the end (or leave these keys to the recipe)"
        )
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} already exists; choose a new directory for the averaged model")
    total: dict[str, torch.Tensor] = {}
    first: dict = {}
    tied_to: dict[str, str] = {}  # name -> the first name of its tensor (tied weights)
    step = 0
    for path in chosen:
        state = _load_training_state(path)
        args = ModelArgs.from_stored(state["model_args"])
        if not first:
            first, first_args = state, args
            names: dict[tuple, str] = {}
            tied_to = {n: names.setdefault(tie_key(t), n) for n, t in state["model"].items()}
        step = max(step, state["progress"]["step"])
        if args != first_args:
            raise UsageError(f"{path} has a different model shape from {chosen[0]}")
        for name, tensor in state["model"].items():
            if tied_to[name] != name:
                continue  # summed under its first name
            value = tensor.double() if tensor.is_floating_point() else tensor
            total[name] = total[name] + value if name in total else value.clone()
    averaged = {
        name: (t / len(chosen)).to(first["model"][name].dtype) if t.is_floating_point() else t
        for name, t in total.items()
    }
    averaged = {name: averaged[tied_to[name]] for name in first["model"]}  # tied stay tied
    if where := first_non_finite(averaged, "the average"):  # checked before anything is written
        raise CheckpointError(f"refusing to write {out}: {where} is not finite")
    out.mkdir(parents=True, exist_ok=True)
    for name in COVERED:
        atomic_copy(paths.root / name, out / name)
    record_manifest(out)
    save_weights(
        RunPaths(out).best,
        averaged,
        asdict(first_args),
        step=step,
        tokenizer_fingerprint=first["tokenizer_fingerprint"],
    )
    log.info("averaged %d checkpoints (%s) into %s", len(chosen),
             ", ".join(p.name for p in chosen), out)  # fmt: skip
    return out


def _load_training_state(path: Path) -> dict:
    """A step checkpoint's state; a model file among them is a one-line error."""
    state = load_checkpoint(path)
    if state.get("kind") == MODEL_KIND or "progress" not in state:
        raise CheckpointError(
            f"{path} is not a training checkpoint (a model file such as best.pt copied into "
            f"{path.parent}?); move it out of that folder and average again"
        )
    return state

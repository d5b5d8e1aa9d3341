"""Step checkpoints of one run, rotated: the newest and the best are kept, the rest deleted.

The files themselves are written and read by `tfm.rundir.checkpoint` (atomic, `weights_only`); this
module decides which exist: `directory/step-{step:08d}.pt` plus an `index.json` recording the order
of saves and each checkpoint's validation score.
"""

import json
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

import torch

from tfm.atomic import PathLike, atomic_write_text
from tfm.errors import CheckpointError
from tfm.failure import brief_error
from tfm.rundir.checkpoint import (
    FORMAT_VERSION,
    CorruptCheckpointError,
    load_checkpoint,
    save_checkpoint,
)

logger = logging.getLogger(__name__)

MODEL_KIND = "model"  # the `kind` of a model file (tfm.rundir.model_file), never a step checkpoint
_STEP_FILE = re.compile(r"step-(\d{8,})\.pt")
_TEMP_GLOBS = (".step-*.pt.tmp-*", ".index.json.tmp-*")


class LoadedCheckpoint(NamedTuple):
    """What `CheckpointStore.latest_loadable` found: the file and its loaded state."""

    path: Path
    state: dict


@dataclass(frozen=True)
class _Entry:
    file: str  # a name matching _STEP_FILE, never a path: the index must not point elsewhere
    step: int
    score: float | None  # None when absent or non-finite: such a checkpoint is never the best


def finite_score(score: object) -> float | None:
    """score as a float if it is a finite number, else None: NaN, inf, a missing score or a
    non-number never counts as a score (neither for the best checkpoint nor for early stopping)."""
    if isinstance(score, bool) or not isinstance(score, int | float):
        return None
    return float(score) if math.isfinite(score) else None


class CheckpointStore:
    """Step checkpoints `directory/step-{step:08d}.pt`, rotated after every save.

    After each save it keeps the `keep_last` newest, the `keep_best` best by validation score
    (`mode="max"`: higher is better; NaN, inf and missing scores never count), the one just saved
    and the one passed as `protect=`. "Newest" is the order of saves, as recorded in
    `directory/index.json`; a checkpoint missing from the index (a crash between writing it and the
    index) is found by scanning and reading its embedded step and score. One writer per folder.
    """

    def __init__(
        self,
        directory: PathLike,
        *,
        keep_last: int = 3,
        keep_best: int = 1,
        mode: Literal["max", "min"] = "max",
    ) -> None:
        if keep_last < 1 or keep_best < 1:
            raise ValueError(f"keep_last={keep_last} and keep_best={keep_best} must both be >= 1")
        if mode not in ("max", "min"):
            raise ValueError(f"mode={mode!r} must be 'max' or 'min'")
        self.directory = Path(directory)
        self.keep_last, self.keep_best, self.mode = keep_last, keep_best, mode
        self._index = self.directory / "index.json"

    def save(
        self, state: dict, *, step: int, score: float | None = None, protect: PathLike | None = None
    ) -> Path:
        """Save state (plus `step` and `score` entries) as this step's checkpoint, then rotate."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step={step!r} must be an int >= 0")
        if isinstance(state, dict) and state.get("step", step) != step:
            raise ValueError(f"state['step']={state['step']!r} differs from step={step}")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(
                f"cannot create checkpoint folder {self.directory} ({brief_error(exc)}); "
                "check the path and its permissions"
            ) from exc
        path = self.directory / f"step-{step:08d}.pt"
        entries = [entry for entry in self._entries() if entry.file != path.name]
        score = None if score is None else float(score)
        save_checkpoint({**state, "step": step, "score": score}, path)
        entries.append(_Entry(path.name, step, finite_score(score)))
        kept = self._prune(entries, protect)
        records = [{"file": e.file, "step": e.step, "score": e.score} for e in kept]
        index = {"format_version": FORMAT_VERSION, "checkpoints": records}
        atomic_write_text(json.dumps(index, indent=1, allow_nan=False) + "\n", self._index)
        for pattern in _TEMP_GLOBS:  # left by writers killed mid-save; we are the only writer
            for leftover in self.directory.glob(pattern):
                leftover.unlink(missing_ok=True)
        return path

    def latest_loadable(self, map_location: str | torch.device = "cpu") -> LoadedCheckpoint | None:
        """The newest checkpoint that loads, skipping (with a warning) truncated, corrupted or
        non-finite ones and model files (best.pt or last.pt copied in here); says when it fell
        back to an older one.

        None only if the folder holds no checkpoint. If some exist but none loads, or one fails for
        another reason (e.g. written by a newer tfm), it raises: silently starting afresh would let
        rotation delete checkpoints that may still be recoverable.
        """
        skipped = []
        for entry in reversed(self._entries()):
            path = self.directory / entry.file
            try:
                state = load_checkpoint(path, map_location)
            except CorruptCheckpointError as exc:
                logger.warning("skipping checkpoint: %s", exc)
                skipped.append(path.name)
                continue
            if state.get("kind") == MODEL_KIND:
                logger.warning("skipping %s: it is a model file (like best.pt), not a training "
                               "checkpoint; move it out of %s", path, self.directory)  # fmt: skip
                skipped.append(path.name)
                continue
            if skipped:
                logger.warning("using %s, the newest good checkpoint (skipped %s)", path,
                               ", ".join(skipped))  # fmt: skip
            return LoadedCheckpoint(path, state)
        if skipped:
            raise CheckpointError(
                f"none of the {len(skipped)} checkpoints in {self.directory} is usable (truncated, "
                "corrupted, non-finite or not a training checkpoint); restore one from a backup, "
                "or start afresh with --overwrite"
            )
        return None

    def best(self) -> Path | None:
        """Path of the best-scoring checkpoint (the earliest of ties), or None if none scored."""
        ranked = self._ranked(self._entries())
        return self.directory / ranked[0].file if ranked else None

    def newest(self, n: int) -> list[Path]:
        """The `n` most recently saved checkpoints, oldest first."""
        return [self.directory / entry.file for entry in self._entries()[-n:]]

    def top(self, n: int) -> list[Path]:
        """The `n` best-scoring checkpoints, best first."""
        return [self.directory / entry.file for entry in self._ranked(self._entries())[:n]]

    def _ranked(self, entries: list[_Entry]) -> list[_Entry]:
        scored = [entry for entry in entries if entry.score is not None]
        sign = -1.0 if self.mode == "max" else 1.0
        return sorted(scored, key=lambda entry: sign * entry.score)  # type: ignore[operator]

    def _prune(self, entries: list[_Entry], protect: PathLike | None) -> list[_Entry]:
        keep = {entry.file for entry in entries[-self.keep_last :]}
        keep |= {entry.file for entry in self._ranked(entries)[: self.keep_best]}
        if protect is not None and Path(protect).parent.resolve() == self.directory.resolve():
            keep.add(Path(protect).name)
        kept = []
        for entry in entries:
            if entry.file not in keep:
                try:
                    (self.directory / entry.file).unlink(missing_ok=True)
                    continue
                except OSError as exc:
                    logger.warning("could not delete old checkpoint %s: %s", entry.file, exc)
            kept.append(entry)
        return kept

    def _entries(self) -> list[_Entry]:
        """Checkpoints on disk, oldest save first: indexed ones in index order, then the rest."""
        on_disk = {p.name for p in self.directory.glob("step-*.pt") if _STEP_FILE.fullmatch(p.name)}
        indexed = {entry.file: entry for entry in self._read_index() if entry.file in on_disk}
        entries = list(indexed.values())
        for name in sorted(on_disk - indexed.keys()):
            entries.append(self._discover(name))
        return entries

    def _read_index(self) -> list[_Entry]:
        try:
            records = json.loads(self._index.read_text(encoding="utf-8"))["checkpoints"]
            return [
                _Entry(str(r["file"]), int(r["step"]), finite_score(r["score"]))
                for r in records
                if _STEP_FILE.fullmatch(str(r["file"]))
            ]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, TypeError, KeyError) as exc:
            logger.warning("ignoring unreadable %s (%s); scanning the folder", self._index, exc)
            return []

    def _discover(self, name: str) -> _Entry:
        step = int(_STEP_FILE.fullmatch(name).group(1))  # type: ignore[union-attr]
        try:
            state = load_checkpoint(self.directory / name)
        except CheckpointError as exc:
            logger.warning("checkpoint not in the index and not loadable: %s", exc)
            return _Entry(name, step, None)
        embedded = state.get("step")
        step = embedded if type(embedded) is int else step
        return _Entry(name, step, finite_score(state.get("score")))

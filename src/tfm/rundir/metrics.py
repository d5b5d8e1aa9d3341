"""A run's `metrics.jsonl`: one JSON object per line, each with "step", appended as training goes.

Training events carry `train_loss`, `lr` and `tokens_per_s`; validation events `val_loss`,
`val_ppl`, `val_bleu`, `val_bleu_lowercase`, `val_chrf` and `val_length_ratio` (hypothesis /
reference tokens, as `tfm eval` reports it; see `tfm.training`), and for each related pair with a
validation split of its own `val_bleu/en-pt` and `val_chrf/en-pt`. Every line is strict JSON: a NaN
or infinite number is written as null. An append that fails (a full disk) takes back whatever part
of its line reached the file. The file may be read while training appends to it, so a line that
does not parse (a torn last line, after a crash) is skipped with a warning rather than failing the
reader: plots and diagnostics must never stop a run; a resumed run drops it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import overload

from tfm.atomic import atomic_write_text
from tfm.failure import write_failure

log = logging.getLogger(__name__)


@overload
def json_safe(value: dict) -> dict: ...


@overload
def json_safe(value: object) -> object: ...


def json_safe(value: object) -> object:
    """value with every NaN or infinite float (in dicts and lists, too) replaced by None, so
    that `json.dumps` writes strict JSON (null) rather than NaN or Infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def append_event(path: Path, event: dict) -> None:
    """Add one event (a JSON object with "step") as the last line of `path`: the whole line or,
    when the write fails, nothing (DiskFullError when the disk is full)."""
    line = (json.dumps(json_safe(event), allow_nan=False) + "\n").encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise write_failure(path, exc) from exc
    try:
        size = os.fstat(fd).st_size
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)  # take back the part of the line that was written
        raise write_failure(path, exc) from exc
    finally:
        os.close(fd)


def truncate_metrics(path: Path, step: int) -> None:
    """Drop the events past `step` (the checkpoint resumed from), so a resumed run's log reads as
    one run, and drop (saying so) lines that are not whole events, such as a torn last line."""
    if not path.exists():
        return
    kept = []
    for number, line, event, problem in _lines(path):
        if event is None:
            log.warning("%s:%d: dropped a line %s (a write cut short by a crash or a full disk)",
                        path, number, problem)  # fmt: skip
        elif event["step"] <= step:
            kept.append(line)
    atomic_write_text("".join(line + "\n" for line in kept), path)


def read_metrics(path: Path) -> list[dict]:
    """The events of `path` in file order; unreadable lines are skipped (and logged)."""
    events = []
    for number, _line, event, problem in _lines(path):
        if event is None:
            log.warning("%s:%d: skipped a line %s", path, number, problem)
        else:
            events.append(event)
    return events


def _lines(path: Path) -> Iterator[tuple[int, str, dict | None, str]]:
    """Each non-blank line of `path` with its number and its event, or None and what is wrong
    with it (not JSON, or not an object with an integer "step")."""
    with Path(path).open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, line, None, f"that is not JSON ({exc.msg})"
                continue
            if isinstance(event, dict) and type(event.get("step")) is int:
                yield number, line, event, ""
            else:
                yield number, line, None, "without an integer 'step'"


def series(events: list[dict], key: str) -> tuple[list[int], list[float]]:
    """Steps and values of the events that have `key` (with a number), in file order."""
    pairs = [
        (e["step"], float(e[key]))
        for e in events
        if isinstance(e.get(key), int | float) and not isinstance(e.get(key), bool)
    ]
    return [s for s, _ in pairs], [v for _, v in pairs]

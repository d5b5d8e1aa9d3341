"""A run's `metrics.jsonl`: one JSON object per line, each with "step", appended as training goes.

Training events carry `train_loss`, `lr` and `tokens_per_s`; validation events `val_loss`,
`val_ppl`, `val_bleu`, `val_bleu_lowercase`, `val_chrf` and `val_length_ratio` (hypothesis /
reference tokens, as `tfm eval` reports it; see `tfm.training`). The file may be read while training
appends to it, so a line that does not parse (a torn last line) is skipped with a warning rather
than failing the reader: plots and diagnostics must never stop a run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from tfm.rundir.atomic import atomic_write_text

log = logging.getLogger(__name__)


def append_event(path: Path, event: dict) -> None:
    """Add one event (a JSON object with "step") as the last line of `path`."""
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(event) + "\n")


def truncate_metrics(path: Path, step: int) -> None:
    """Drop the events past `step` (the checkpoint resumed from), so a resumed run's log reads as
    one run."""
    if not path.exists():
        return
    kept = [line for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line)["step"] <= step]  # fmt: skip
    atomic_write_text("".join(line + "\n" for line in kept), path)


def read_metrics(path: Path) -> list[dict]:
    """The events of `path` in file order; unreadable lines are skipped (and logged)."""
    events = []
    with Path(path).open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                log.warning("%s:%d: skipped a line that is not JSON (%s)", path, number, exc.msg)
                continue
            if not isinstance(event, dict) or not isinstance(event.get("step"), int):
                log.warning("%s:%d: skipped a line without an integer 'step'", path, number)
                continue
            events.append(event)
    return events


def series(events: list[dict], key: str) -> tuple[list[int], list[float]]:
    """Steps and values of the events that have `key` (with a number), in file order."""
    pairs = [
        (e["step"], float(e[key]))
        for e in events
        if isinstance(e.get(key), int | float) and not isinstance(e.get(key), bool)
    ]
    return [s for s, _ in pairs], [v for _, v in pairs]

"""Everything a run needs to continue exactly where it stopped, as plain checkpointable values."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

import torch


@dataclass
class Progress:
    """Where training is: counters, the data position and the early-stopping record.

    `position` is the index of the next batch inside `epoch`'s batch list (`sampler.epoch(epoch)`),
    so a resumed run continues with exactly the batches the uninterrupted run would have seen.
    """

    step: int = 0
    epoch: int = 0
    position: int = 0
    elapsed_s: float = 0.0
    best_score: float | None = None
    best_step: int | None = None
    validations_without_gain: int = 0
    nonfinite_in_a_row: int = 0
    nonfinite_total: int = 0
    tokens_seen: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> Progress:
        return cls(**values)


def rng_state() -> dict:
    """All random number generator states a step can consume (torch CPU/CUDA, Python)."""
    state = {"torch": torch.get_rng_state(), "python": _python_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _python_state() -> list:
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]

"""What the recipe's rules work on: the settings as given and derived (each derived key with the
rule that chose it), the figures and device they are derived from, and the clock that times
shapes under a time budget."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tfm.data.corpus_figures import TextFigures
from tfm.training.recipe.fingerprint import TokenFigures
from tfm.training.recipe.ladder import Shape


@dataclass(frozen=True)
class Choice:
    """A derived value and the rule that chose it, written with its figures."""

    value: Any
    rule: str


@dataclass
class Settings:
    """What the config gives (`given`: section → key → value, only keys it sets) and what the
    rules derive, as the same mapping, with each derived key's rule (`reasons`, dotted keys);
    `lines` say what was measured and chosen, `notes` how the plan follows a given key."""

    given: dict[str, dict]
    derived: dict[str, dict] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    steps: int | None = None  # the planned training steps, once derived
    epochs: float | None = None  # and the epochs they make
    steps_an_epoch: int | None = None
    ceiling: int | None = None  # under a time budget alone: the most steps the corpus is worth
    validation_seconds: float = 0.0  # and a validation's, as timed

    def get(self, section: str, key: str):
        """The key's value: the config's, else the derived one (None before it is derived)."""
        if self.is_given(section, key):
            return self.given[section][key]
        return self.derived.get(section, {}).get(key)

    def beam_width(self) -> int:
        """The hypotheses validation keeps a sentence: the beam's, or 1 (greedy, sampling)."""
        beam = self.get("decoding", "strategy") == "beam"
        return self.get("decoding", "beam_size") if beam else 1

    def is_given(self, section: str, key: str) -> bool:
        return key in self.given.get(section, {})

    def choose(self, dotted: str, choice: Choice) -> None:
        """Derive `choice` for the key (`section.key`) unless the config gives one."""
        section, key = dotted.split(".")
        if not self.is_given(section, key):
            self.derived.setdefault(section, {})[key] = choice.value
            self.reasons[dotted] = choice.rule

    def given_train(self, key: str):
        """A train key the config gives (a budget, accumulate, …), or None."""
        return self.given.get("train", {}).get(key)


class Clock(Protocol):
    """How long things take on this device, measured: seconds of one step of a shape at a
    batch size, and of one validation of a shape decoded with a beam (1: greedy)
    (`calibration.Calibration`)."""

    def step_seconds(self, shape: Shape, max_tokens: int) -> float: ...

    def validation_seconds(self, shape: Shape, beam_size: int) -> float: ...


@dataclass(frozen=True)
class Inputs:
    """What the rules are derived from besides the config: the corpus's figures, the number of
    batches an epoch of `max_tokens` makes, the device, the time budget and its `clock` (None
    without one), whether sacreBLEU can tokenize the target language, whether a shape fits in
    memory, the processes training together (torchrun), and the share of an epoch's batch
    tokens the batch is sized from (`batch_share`: the main pair's own, beside related pairs)."""

    texts: TextFigures
    tokens: TokenFigures
    batches_per_epoch: Callable[[int], int]
    gpu: bool
    minutes: float | None = None
    clock: Clock | None = None
    bleu_ready: bool = True
    fits: Callable[[Shape, int], bool] | None = None
    world_size: int = 1
    compiled: bool = False
    batch_share: float = 1.0

"""The back-translation plan: how a run with `data.monolingual` divides its time budget, how
much of the text it back-translates, and how it mixes the synthetic pairs with the real ones.

    plan = plan_phases(config, real_pairs=10_681, available=49_990)
    plan.lines        # the plan in words, for `tfm config show`, plan.json and train.log

Three phases share `train.max_minutes`: a model of the reverse direction trains for
`REVERSE_SHARE` of it; it translates the chosen lines into synthetic sources for at most
`GENERATION_SHARE` of it (decoding stops there, keeping what it made); the pair then trains on
its real pairs and the synthetic ones, tagged `<bt>`, for what is left. Each constant is where
the runs in docs/experiments.md put it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from tfm.config import BACK_TRANSLATION_TAG, Config

# The reverse model's share of the budget.
REVERSE_SHARE = 0.25
# The most of the budget that generating the synthetic sources may take; at the speed greedy
# decoding of a small model reaches on one CPU thread (about 700 sentences a second), 50,000
# lines take about a minute.
GENERATION_SHARE = 0.10
# Synthetic pairs a real pair at most: past that, the synthetic pairs crowd out the real ones.
SYNTHETIC_PER_REAL = 4
# The real pairs are read this many times an epoch for each `REAL_EVERY` synthetic pairs per
# real pair: upsampled so that they keep a share of every epoch.
REAL_EVERY = 2
# Below this budget, the reverse model and the generation leave the pair too little time:
# back-translation is left out.
MIN_MINUTES = 20.0
STRATEGY = "greedy"  # how the reverse model decodes the monolingual text


@dataclass(frozen=True)
class PhasePlan:
    """What the plan decided (module docstring); `skipped` says why there are no phases."""

    budget_s: float | None
    reverse_s: float | None
    generation_cap_s: float | None
    lines: int  # monolingual lines to back-translate
    available: int  # monolingual lines there are
    real_pairs: int
    repeat: int  # of the real pairs, an epoch
    strategy: str = STRATEGY
    tag: str = BACK_TRANSLATION_TAG
    skipped: str | None = None

    def record(self) -> dict:
        return asdict(self)

    @classmethod
    def from_record(cls, record: dict) -> PhasePlan:
        return cls(**record)

    def describe(self) -> list[str]:
        """The plan in words, a line a decision with its figures."""
        if self.skipped:
            return [f"back-translation left out: {self.skipped}"]
        minutes = f"{self.budget_s / 60:g} minutes" if self.budget_s else "no time budget"
        reverse = (
            f"{self.reverse_s / 60:.1f} minutes ({REVERSE_SHARE:.0%} of {minutes})"
            if self.reverse_s
            else "its own recipe (no time budget)"
        )
        cap = (
            f", at most {self.generation_cap_s / 60:.1f} minutes ({GENERATION_SHARE:.0%})"
            if self.generation_cap_s
            else ""
        )
        ratio = self.lines / max(self.real_pairs * self.repeat, 1)
        return [
            f"back-translation in {minutes}: {self.available:,} monolingual lines, "
            f"{self.real_pairs:,} real pairs",
            f"phase 1, the reverse model: {reverse}",
            f"phase 2, synthetic sources: {self.lines:,} lines decoded {self.strategy}{cap} "
            f"(at most {SYNTHETIC_PER_REAL} a real pair)",
            f"phase 3, the pair: real pairs ×{self.repeat} and synthetic pairs tagged "
            f"<{self.tag}>, 1:{ratio:.1f}, for the rest of the budget",
        ]


def plan_phases(config: Config, *, real_pairs: int, available: int) -> PhasePlan:
    """The plan for a run of `config` whose training corpus has `real_pairs` pairs and whose
    monolingual text `available` lines."""
    minutes = config.train.max_minutes
    budget = minutes * 60 if minutes is not None else None
    lines = min(available, SYNTHETIC_PER_REAL * real_pairs)
    repeat = max(1, math.floor(lines / real_pairs / REAL_EVERY))
    plan = PhasePlan(
        budget_s=budget,
        reverse_s=REVERSE_SHARE * budget if budget else None,
        generation_cap_s=GENERATION_SHARE * budget if budget else None,
        lines=lines,
        available=available,
        real_pairs=real_pairs,
        repeat=repeat,
    )
    if minutes is not None and minutes < MIN_MINUTES:
        why = (
            f"train.max_minutes={minutes:g} is under {MIN_MINUTES:g}: the reverse model and the "
            "generation would leave the pair too little time to gain from them"
        )
        return PhasePlan(**{**plan.record(), "skipped": why})
    return plan

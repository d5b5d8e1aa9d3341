"""The back-translation plan: how a run with `data.monolingual` divides its time budget, how
much of the text it back-translates, and how it mixes the synthetic pairs with the real ones.

    plan = plan_phases(config, real_pairs=10_681, available=49_990)
    plan.lines        # the plan in words, for `tfm config show`, plan.json and train.log

Three phases share `train.max_minutes`: a model of the reverse direction trains for
`REVERSE_SHARE` of it; it translates the chosen lines into synthetic sources for at most
`GENERATION_SHARE` of it (decoding stops there, keeping what it made); the pair then trains on
its real pairs and the synthetic ones, tagged `<bt>`, for what is left, in the batches its real
pairs alone would get: the synthetic pairs add data, not time, and on a CPU a step's time grows
with its tokens, so a batch sized for the larger corpus would buy fewer updates in the same
budget. The runs behind each constant are in docs/experiments.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from tfm.config import BACK_TRANSLATION_TAG, Config
from tfm.data.cache.cache_entry import CacheEntry
from tfm.data.cache.cache_folder import cache_root
from tfm.data.ragged import lengths_of
from tfm.data.tokenizer import Tokenizer
from tfm.device import select_device
from tfm.rundir.paths import BACKTRANSLATION_FILES
from tfm.training.recipe import rules
from tfm.training.recipe.fingerprint import measure_tokens

_, REVERSE_DIR, _, SYNTHETIC_FILE = BACKTRANSLATION_FILES

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
    max_tokens: int | None = None  # the pair's batch: its real pairs' (None: the config's)
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
            f"<{self.tag}>, 1:{ratio:.1f}, "
            + ("for the rest of the budget" if self.budget_s else "by its own recipe")
            + (f", in the {self.max_tokens:,}-token batches of its real pairs"
               if self.max_tokens else ""),
        ]  # fmt: skip


def plan_from(
    config: Config, entry: CacheEntry, available: int, *, world_size: int = 1
) -> PhasePlan:
    """`plan_phases` for the pair's prepared corpus `entry` (its real pairs, and the batch the
    recipe gives them on this device, for `world_size` processes) and `available` monolingual
    lines."""
    train = entry.split(max_length=config.data.max_length)
    tokens = measure_tokens(lengths_of(train.src), lengths_of(train.tgt))
    gpu = select_device(config.train.device).type == "cuda"
    per_step = config.train.accumulate * world_size
    batch = rules.batch_tokens(tokens.batch_tokens, gpu=gpu, batches_a_step=per_step).value
    return plan_phases(config, real_pairs=len(train), available=available, real_batch=batch)


def plan_phases(
    config: Config, *, real_pairs: int, available: int, real_batch: int | None = None
) -> PhasePlan:
    """The plan for a run of `config` whose training corpus has `real_pairs` pairs and whose
    monolingual text `available` lines; `real_batch` is the batch the recipe gives the real
    pairs alone (`rules.batch_tokens`), which the pair keeps unless the config gives one."""
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
        max_tokens=None if "max_tokens" in config.train.model_fields_set else real_batch,
    )
    if minutes is not None and minutes < MIN_MINUTES:
        why = (
            f"train.max_minutes={minutes:g} is under {MIN_MINUTES:g}: the reverse model and the "
            "generation would leave the pair too little time to gain from them"
        )
        return PhasePlan(**{**plan.record(), "skipped": why})
    return plan


def reverse_config(config: Config, plan: PhasePlan, tokenizer: Tokenizer) -> Config:
    """Phase 1's run: `config` the other way round, in `run_dir/reverse`, with its share of the
    budget, no monolingual text and the pair's data cache."""
    values = config.model_dump(mode="json", exclude_unset=True)
    data = values.setdefault("data", {})
    data.update(src_lang=config.data.tgt_lang, tgt_lang=config.data.src_lang, monolingual=[],
                cache_dir=str(cache_root(config)))  # fmt: skip
    values["run_dir"] = str(Path(config.run_dir) / REVERSE_DIR)
    values.setdefault("tokenizer", {})["vocab_size"] = _vocab_size(tokenizer)
    if plan.reverse_s is not None:
        values.setdefault("train", {})["max_minutes"] = round(plan.reverse_s / 60, 4)
    return Config.model_validate(values)


def pair_config(
    config: Config, plan: PhasePlan, tokenizer: Tokenizer, minutes: float | None
) -> Config:
    """Phase 3's run: `config`'s corpora read `plan.repeat` times an epoch, then the synthetic
    corpus tagged, for `minutes`."""
    values = config.model_dump(mode="json", exclude_unset=True)
    data = config.data
    corpora = [
        {**source.model_dump(mode="json", exclude_unset=True),
         "repeat": source.repeat * plan.repeat}
        for source in data.corpora
    ]  # fmt: skip
    synthetic = {"format": "tsv", "path": str(Path(config.run_dir) / SYNTHETIC_FILE),
                 "columns": [data.src_lang, data.tgt_lang], "tag": plan.tag}  # fmt: skip
    values.setdefault("data", {})["train"] = [*corpora, synthetic]
    values.setdefault("tokenizer", {})["vocab_size"] = _vocab_size(tokenizer)
    if minutes is not None:
        values.setdefault("train", {})["max_minutes"] = round(minutes, 4)
    if plan.max_tokens is not None:
        values.setdefault("train", {})["max_tokens"] = plan.max_tokens
    return Config.model_validate(values)


def without_text(config: Config) -> Config:
    """`config` without its monolingual text: the run a plan that leaves it out trains."""
    values = config.model_dump(mode="json", exclude_unset=True)
    values["data"]["monolingual"] = []
    return Config.model_validate(values)


def _vocab_size(tokenizer: Tokenizer) -> int:
    return max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)

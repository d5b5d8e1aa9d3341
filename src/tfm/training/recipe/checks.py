"""Settings that cannot work, named before training starts, each with what to do instead.

`check_texts` looks at a training corpus (too small to learn from, or the same text on both
sides); `check_settings` at a resolved config against the steps it plans: a warm-up that never
ends, validations that never come, patience that can never run out, and more checkpoints to
average than will exist. Both return warnings; training goes on, since each can be what a user
wants for a quick look.
"""

from __future__ import annotations

from tfm.config import Config, planned
from tfm.data.corpus_figures import OFF_RATIO, TextFigures
from tfm.training.recipe.rules import validations_that_can_stop

FEWEST_PAIRS = 300  # below this, no model learns to translate
MOSTLY_IDENTICAL = 0.5  # share of pairs with the same text on both sides
# Lines out of step (corpus_figures): over this share of pairs off the usual length ratio
# (aligned Multi30k and Tatoeba 0.04-0.7%, the same one line behind 9-19%) and a correlation of
# the sides' log word counts under this (aligned 0.77-0.88, one line behind -0.25 to 0.19).
OUT_OF_STEP = 0.05
FOLLOWING_LENGTHS = 0.5


def check_texts(texts: TextFigures, config: Config) -> list[str]:
    """Warnings about the training corpus itself."""
    found = []
    if texts.pairs < FEWEST_PAIRS:
        found.append(
            f"data.train: only {texts.pairs:,} sentence pairs, too few to learn translation "
            f"from (at least {FEWEST_PAIRS:,}; a few thousand to translate short sentences)"
        )
    if texts.identical > MOSTLY_IDENTICAL:
        found.append(
            f"data.train: {texts.identical:.0%} of the pairs have the same text on both sides; "
            f"check that the {config.data.src_lang} and {config.data.tgt_lang} sides are two "
            "languages (file suffixes, tsv columns, jsonl fields)"
        )
    if texts.off_ratio > OUT_OF_STEP and texts.length_correlation < FOLLOWING_LENGTHS:
        found.append(
            f"data.train: {texts.off_ratio:.0%} of the pairs are more than {OFF_RATIO:g} times "
            "longer or shorter, in words, than the corpus's usual ratio of source to target, and "
            f"the lengths of the two sides hardly follow each other (correlation "
            f"{texts.length_correlation:.2f}): its lines may be out of step (one missing from a "
            "file shifts every pair after it); tfm data check shows examples"
        )
    return found


def checkpoints_kept(config: Config, steps: int) -> int:
    """How many checkpoints a run of `steps` steps will have when it ends: one at each
    validation and each `checkpoint_every`, one at the end, at most `keep_last` of them."""
    t = config.train
    every = planned(t.validate_every, "train.validate_every")
    at = set(range(every, steps + 1, every)) | {steps}
    if t.checkpoint_every is not None:
        at |= set(range(t.checkpoint_every, steps + 1, t.checkpoint_every))
    return min(len(at), planned(t.keep_last, "train.keep_last"))


def check_settings(config: Config, steps: int | None) -> list[str]:
    """Warnings about settings that cannot work in a run of `steps` planned steps (None:
    unknown, nothing to check)."""
    if not steps:
        return []
    t = config.train
    warmup = planned(t.warmup_steps, "train.warmup_steps")
    every = planned(t.validate_every, "train.validate_every")
    average = planned(t.average_last, "train.average_last")
    found = []
    if warmup >= steps:
        found.append(
            f"train.warmup_steps={t.warmup_steps} is not shorter than the {steps:,} planned "
            f"steps: the learning rate never reaches its peak; set it to about "
            f"{max(steps // 10, 1)} (or leave it out for the recipe's)"
        )
    can_stop = validations_that_can_stop(steps, every)
    if every > steps:
        found.append(
            f"train.validate_every={t.validate_every} is longer than the {steps:,} planned "
            f"steps: training validates only at its end; set it to about {max(steps // 8, 1)}"
        )
    if t.patience is not None and t.patience >= max(can_stop, 1):
        found.append(
            f"train.patience={t.patience} can never stop training: of the {can_stop + 1} "
            f"validation(s) planned in {steps:,} steps (train.validate_every={t.validate_every}),"
            f" {can_stop} come before the one at the end; lower it or validate more often"
        )
    kept = checkpoints_kept(config, steps)
    if average > kept:
        found.append(
            f"train.average_last={t.average_last} averages more checkpoints than the {kept} "
            f"the run will keep; set train.checkpoint_every to about "
            f"{max(steps // (4 * average), 1)} and train.keep_last to at least "
            f"{t.average_last}"
        )
    return found

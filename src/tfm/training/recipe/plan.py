"""A run's recipe: every training setting the config leaves unset, derived from its data.

    config, plan = plan_run(config, device=device, dtype=dtype)
    plan.lines          # what was measured and chosen, for the start log and `tfm config show`
    plan.warnings       # settings that cannot work as given, each with its remedy

    plan.reasons        # each derived key's rule with its figures (`tfm config show`)

The training corpus is measured as it is prepared: its raw pairs first (the BPE vocabulary
size is chosen from them), then its encoded split, which the data cache keeps for training.
The rules are in `derive.py`. The returned config sets every key, so a run's config.yaml
holds the plan, and a resumed run, or a second process under torchrun, takes its plan from
there (`with_stored_plan`) rather than deriving it again. A plan whose steps come from a time
budget (`plan.timed`) is re-timed as the run trains (`training/clock.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import torch
from pydantic import ValidationError

from tfm.config import RECIPE_KEYS, Config, load_config, planned
from tfm.config.show import render_yaml
from tfm.data.batching import TokenBatchSampler
from tfm.data.cache.cache_entry import CacheEntry
from tfm.data.cache.prepared_cache import prepared_entry
from tfm.data.corpus import LoadReport
from tfm.data.corpus_figures import TextFigures
from tfm.data.pipeline import EncodedSplit, check_splits, prepare_splits, related_validations
from tfm.data.ragged import lengths_of
from tfm.data.related import describe_mix, main_batch_share
from tfm.data.tokenizer import Tokenizer
from tfm.device import select_device, training_precision
from tfm.errors import ConfigError
from tfm.logs import quieted
from tfm.prediction.scoring import bleu_is_prescribed
from tfm.threads import busy_machine, use_threads
from tfm.training.recipe.calibration import Calibration
from tfm.training.recipe.checks import check_settings, check_texts
from tfm.training.recipe.choices import Inputs, Settings
from tfm.training.recipe.derive import derive, derive_vocabulary
from tfm.training.recipe.fingerprint import TokenFigures, measure_tokens
from tfm.training.recipe.ladder import Shape
from tfm.training.recipe.memory import available_bytes, estimate_training_bytes

log = logging.getLogger(__name__)


@dataclass
class Plan:
    """What the recipe measured and chose (`lines`), which keys it derived (`derived`, dotted)
    and why (`reasons`), how it follows keys the config gives (`notes`), and the warnings about
    settings that cannot work. `timed`: the steps come from the time budget alone, so the run
    re-times them as it trains, up to `ceiling` steps (the most the corpus is worth)."""

    lines: list[str] = field(default_factory=list)
    steps: int | None = None  # the planned training steps, when derived
    derived: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timed: bool = False
    ceiling: int | None = None
    validation_seconds: float = 0.0  # a validation's, as timed for a time budget
    entry: CacheEntry | None = None  # the prepared training split it planned from
    validation: EncodedSplit | None = None  # and the validation split, where it was read

    def explained(self, config: Config) -> list[str]:
        """The plan as lines: figures and choices, then `key = value  ← rule` for every
        derived key, then the notes."""
        keys = [
            f"{key} = {_value(config, key)}  ← {self.reasons.get(key, 'no rule')}"
            for key in self.derived
        ]
        return [*self.lines, *keys, *self.notes]

    def record(self, settings: Settings) -> None:
        """Take what the rules derived and said."""
        self.lines += settings.lines
        self.steps, self.reasons = settings.steps, settings.reasons
        self.notes, self.warnings = settings.notes, self.warnings + settings.warnings
        self.timed, self.ceiling = settings.ceiling is not None, settings.ceiling
        self.validation_seconds = settings.validation_seconds

    def log(self, config: Config) -> None:
        if self.derived:
            lines = "\n".join(f"  {line}" for line in self.explained(config))
            log.info("recipe from the data:\n%s", lines)
        for warning in self.warnings:
            log.warning("%s", warning)


def _value(config: Config, dotted: str) -> str:
    from tfm.config.show import yaml_value

    section, key = dotted.split(".")
    return yaml_value(getattr(getattr(config, section), key))


def given_keys(config: Config) -> dict[str, dict]:
    """The recipe keys `config` sets itself, by section: those its file or --set gave (a value
    equal to the default counts as given)."""
    given: dict[str, dict] = {}
    for section, keys in RECIPE_KEYS.items():
        part = getattr(config, section)
        given[section] = {k: getattr(part, k) for k in keys if k in part.model_fields_set}
    return given


def unset_keys(config: Config) -> list[str]:
    """The recipe keys `config` leaves to the recipe, dotted."""
    given = given_keys(config)
    return [f"{s}.{k}" for s, keys in RECIPE_KEYS.items() for k in keys if k not in given[s]]


def with_values(config: Config, values: dict[str, dict]) -> Config:
    """`config` with `values` (section → key → value) set; every key then counts as given."""
    data = config.model_dump(mode="json")
    for section, keys in values.items():
        data[section].update(keys)
    return Config.model_validate(data)


def with_stored_plan(config: Config, stored: Config) -> Config:
    """`config` with the keys it leaves unset taken from `stored`, the resolved config of the
    run it continues (a resumed run keeps its plan). A given key that the run's planned ones
    cannot go with (`model.n_heads` that does not divide its d_model) is a ConfigError."""
    values: dict[str, dict] = {}
    for dotted in unset_keys(config):
        section, key = dotted.split(".")
        values.setdefault(section, {})[key] = getattr(getattr(stored, section), key)
    try:
        return with_values(config, values)
    except ValidationError as exc:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise ConfigError(
            f"the config's keys do not fit the plan that {config.run_dir} was trained with "
            f"({problems}): give the run's own values, or start it again with --overwrite"
        ) from None


def plan_run(
    config: Config,
    *,
    device: torch.device,
    dtype: torch.dtype,
    tokenizer: Tokenizer | None = None,
    world_size: int = 1,
) -> tuple[Config, Plan]:
    """The config with every unset recipe key derived, and the plan (module docstring). The
    training split is prepared in the data cache on the way (`plan.entry`; training then maps
    it), and the validation split is read where a validation is timed (`plan.validation`)."""
    plan = Plan(derived=unset_keys(config))
    if not plan.derived:
        return config, plan
    settings = Settings(given=given_keys(config))
    plan.entry = entry = prepared_entry(config, tokenizer=tokenizer, announce=False)
    texts = entry.figures()
    plan.warnings += check_texts(texts, config)
    derive_vocabulary(settings, texts)
    plan.lines.append(_describe_texts(texts, config))
    plan.lines += describe_mix(config.data, entry.report())
    sized = with_values(config, settings.derived)
    train = entry.split(max_length=config.data.max_length)
    tokens = measure_tokens(lengths_of(train.src), lengths_of(train.tgt))
    plan.lines.append(_describe_tokens(tokens, sized, texts.pairs))
    minutes = config.train.max_minutes
    validation = _Validation(sized, entry.tokenizer(), entry.report())
    inputs = Inputs(
        texts=texts,
        tokens=tokens,
        batches_per_epoch=_batches_per_epoch(train, config.train.seed),
        gpu=device.type == "cuda",
        minutes=minutes,
        clock=_clock(sized, train, validation, device, dtype) if minutes else None,
        bleu_ready=bleu_is_prescribed(config.data.tgt_lang, unspaced=texts.tgt.unspaced),
        fits=_fits(sized, device),
        world_size=world_size,
        compiled=config.train.compile,
        batch_share=main_batch_share(config.data, entry.report()),
    )
    busy = busy_machine() if minutes else None
    derive(settings, inputs)
    if busy:
        settings.warnings.append(
            f"the steps were timed on a busy machine ({busy}): the plan is for a slower "
            "machine than a quiet one; the run re-times its length as it trains, but its model, "
            "dropout and cadence stay as planned (plan on a quiet machine, or give the keys)"
        )
    plan.record(settings)
    plan.validation = validation.split
    return with_values(config, settings.derived), plan


def _fits(config: Config, device: torch.device) -> Callable[[Shape, int], bool]:
    """Whether training a shape with batches of `max_tokens` fits in `device`'s available memory
    (`memory.py`); always, where that is unknown."""
    available = available_bytes(device)
    vocab = planned(config.tokenizer.vocab_size, "tokenizer.vocab_size")

    def fits(shape: Shape, max_tokens: int) -> bool:
        args = shape.model_args(vocab_size=vocab, max_len=config.model.max_len)
        return available is None or estimate_training_bytes(args, max_tokens) <= available

    return fits


def _batches_per_epoch(train: EncodedSplit, seed: int) -> Callable[[int], int]:
    src, tgt = lengths_of(train.src), lengths_of(train.tgt)

    @cache
    def count(max_tokens: int) -> int:
        return len(TokenBatchSampler(src, tgt, max_tokens=max_tokens, seed=seed))

    return count


class _Validation:
    """The validation split, read and encoded once, when first asked for (`split` then); what a
    validation decodes is costed with the related pairs' own validation splits (`decoded`),
    which the training report `report` reads."""

    def __init__(self, config: Config, tokenizer: Tokenizer, report: LoadReport) -> None:
        self.config, self.tokenizer, self.report = config, tokenizer, report
        self.split: EncodedSplit | None = None
        self._decoded: EncodedSplit | None = None

    def decoded(self) -> EncodedSplit:
        """The main pair's validation split and every related pair's scored beside it, as one
        split: the sentences a validation decodes (read once, for every shape timed)."""
        if self._decoded is None:
            self._decoded = self._joined()
        return self._decoded

    def _joined(self) -> EncodedSplit:
        main = self()
        with quieted("tfm.data"):  # training logs their reads
            related = [r.split for r in related_validations(self.config.data, self.tokenizer,
                                                            self.report)]  # fmt: skip
        if not related:
            return main
        splits = [main, *related]
        return EncodedSplit(
            name="validation",
            src_text=[text for split in splits for text in split.src_text],
            tgt_text=[text for split in splits for text in split.tgt_text],
            src=[ids for split in splits for ids in split.src],
            tgt=[ids for split in splits for ids in split.tgt],
            report=main.report,
        )

    def __call__(self) -> EncodedSplit:
        if self.split is None:
            c = self.config
            splits, _ = prepare_splits(
                c.data, c.tokenizer, ("validation",), tokenizer=self.tokenizer
            )
            self.split = splits["validation"]
        return self.split


def _clock(
    config: Config,
    train: EncodedSplit,
    validation: _Validation,
    device: torch.device,
    dtype: torch.dtype,
) -> Calibration:
    return Calibration(
        train=train,
        validation=validation.decoded,
        config=config,
        tokenizer=validation.tokenizer,
        vocab_size=planned(config.tokenizer.vocab_size, "tokenizer.vocab_size"),
        device=device,
        dtype=dtype,
    )


def _describe_texts(texts: TextFigures, config: Config) -> str:
    d = config.data
    return (
        f"corpus {d.src_lang}→{d.tgt_lang}: {texts.pairs:,} pairs; words a sentence "
        f"{texts.src.words:.1f} / {texts.tgt.words:.1f}, scripts {texts.src.script.lower()} / "
        f"{texts.tgt.script.lower()}, {texts.types:,} word types, "
        f"{texts.distinct_chars:,} distinct characters"
    )


def _describe_tokens(tokens: TokenFigures, config: Config, read: int) -> str:
    """The encoded training split's figures, and how many of the `read` pairs it keeps where
    data.max_length drops some (the rules after it count the kept pairs)."""
    within = f"the {tokens.pairs:,} pairs within data.max_length={config.data.max_length}"
    kept = "" if tokens.pairs == read else f" ({within})"
    return (
        f"BPE {config.tokenizer.vocab_size:,}{kept}: tokens a sentence {tokens.src_mean:.1f} / "
        f"{tokens.tgt_mean:.1f} (95th percentile {tokens.src_p95:.0f} / {tokens.tgt_p95:.0f}), "
        f"{tokens.tgt_tokens:,} target tokens"
    )


def show_planned(config: str | None, overrides: list[str], *, comments: bool = True) -> str:
    """`tfm config show`: what `tfm train` would plan for the config on this machine, without
    training: the plan's lines and warnings as comments, then the resolved config as YAML
    (every key) that `tfm train --config` reads back as the same configuration."""
    loaded = load_config(config, overrides)
    check_splits(loaded.data, ("train", "validation"))  # before either is read or timed
    phases: list[str] = []
    planned = loaded
    if loaded.data.monolingual:  # the phases, then the first run's plan: the reverse model's
        phases, planned = _phases(loaded)
    if not unset_keys(planned):
        return _commented(phases) + render_yaml(loaded, comments=comments)
    device = select_device(planned.train.device)
    use_threads(planned.train.threads)
    # timed as training times it: in its precision (bf16 autocast for `auto` on a GPU)
    tokenizer = prepared_entry(loaded, announce=False).tokenizer() if phases else None
    dtype = training_precision(planned.train.precision, device)
    resolved, plan = plan_run(planned, device=device, dtype=dtype, tokenizer=tokenizer)
    warnings = plan.warnings + check_settings(resolved, plan.steps)
    title = f"recipe of {resolved.run_dir}, from the data:" if phases else "recipe from the data:"
    lines = [title, *(f"  {line}" for line in plan.explained(resolved))]
    lines += [f"warning: {warning}" for warning in warnings]
    shown = loaded if phases else resolved  # a run in phases reads back its config as it is
    return _commented(phases) + _commented(lines) + render_yaml(shown, comments=comments)


def _commented(lines: list[str]) -> str:
    return "".join(f"# {line}\n" for line in lines)


def _phases(config: Config) -> tuple[list[str], Config]:
    """The lines of the phase plan of a config with monolingual text, and the config of its
    first run: the reverse model's, or the pair's own where the plan leaves the text out."""
    from tfm.data.monolingual import check_monolingual, prepared_monolingual
    from tfm.training.recipe.phase_budget import plan_from, reverse_config, without_text

    check_monolingual(config.data)
    entry = prepared_entry(config, announce=False)
    text = prepared_monolingual(config)
    plan = plan_from(config, entry, len(text))
    if plan.skipped:
        return plan.describe(), without_text(config)
    return plan.describe(), reverse_config(config, plan, entry.tokenizer())

"""The rules that turn a corpus's figures, the device and the budget into training settings.

Each rule is a small function of measured figures; `derive` applies them in order to every
recipe key (`RECIPE_KEYS`) that the config leaves unset, and returns the settings with the
lines that say where they came from. A key the config sets is never changed, and the rules
that follow it use the config's value (a config that sets `model.d_model` still gets a peak
rate and a warm-up derived for that width).

The rules, in the order they are applied:

- vocabulary: a quarter of the corpus's word types (both sides), rounded to 500, at least
  twice its distinct characters, in [1000, 32000] (small corpora learn best with small BPE
  vocabularies; Sennrich & Zhang, 2019);
- batch: the largest power of two that gives an epoch at least `STEPS_PER_EPOCH` steps, in
  [1024, 4096] on a CPU, [2048, 16384] on a GPU (a small corpus learns more from more, smaller
  updates: Sennrich & Zhang, 2019; on Tatoeba's 12k-pair en-ja, 1,024-token batches reached 7.8
  BLEU in 15 minutes where 2,048-token ones reached 2.4);
- model: the largest rung of the ladder (`ladder.py`) that the corpus has enough target tokens
  for, whose training fits in the device's memory and, under a time budget, that trains at
  least `min_epochs` in it and at least `TOKENS_PER_LAYER` batch tokens per layer of its stacks
  (a deeper stack needs more training before it overtakes a shallower one: 1,000 steps a layer
  of 2,048-token batches, 500 of 4,096-token ones); each smaller rung is timed in turn until
  one does;
- length: the steps the budget gives (max_steps; max_epochs; or max_minutes at the timed speed,
  less validation, with a margin); without any budget, `default_epochs` epochs;
- dropout 0.1 for corpora trained for up to 25 epochs, 0.2 or 0.3 the more epochs they get
  (the 7.6M model at 0.1 peaked at epoch 29 on Multi30k en→de); label smoothing 0.1 (§5.4);
- peak rate 1e-3 · 256 / d_model; warm-up 8% of the steps, at least 120 steps a layer of the
  two stacks (a deeper post-norm stack needs a longer one), at most a quarter of the steps and
  at most 4000; cosine decay to 30% of the peak by the last step, where the average of
  the last checkpoints finishes the annealing (`schedule.FLOOR`);
- validation 8 times in the run (fewer when validation is slow: at most 15% of a time budget);
  no early stopping under the cosine decay (it is planned to its end), else patience half the
  validations (none under 6); checkpoints every 3% of the steps, the last 5 averaged;
- decoding: beam 5; the best checkpoint by BLEU, or by chrF where sacreBLEU's tokenizer for the
  target language is not installed (BLEU on unsegmented Japanese says little).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from tfm.training.recipe.fingerprint import TextFigures, TokenFigures
from tfm.training.recipe.ladder import LADDER, Shape, largest_for

SHAPE_KEYS = ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff")

STEPS_PER_EPOCH = 100  # at least, where the device's smallest batch allows
TIME_MARGIN = 0.92  # of a time budget's training time planned for steps: the clock has noise
VALIDATIONS = 8  # in a run, besides the one at its end
VALIDATION_SHARE = 0.15  # of a time budget, at most, spent validating
AVERAGE = 5  # checkpoints averaged at the end
CHECKPOINT_SHARE = 0.03  # of the steps, between checkpoints: the last AVERAGE span 15%
TOKENS_PER_LAYER = 2_048_000  # batch tokens a rung under a time budget needs per stack layer
# Warm-up steps a stack layer needs, at least: a post-norm stack at its peak rate too early can
# settle on one output for every source. On Multi30k de->en, the 3+3-layer m warmed up in 257
# steps gave every validation sentence the same translation at step 402 and was at 3.7 BLEU at
# step 804 (30.3 with 720 steps); the hand recipe warms the same model up in 800.
WARMUP_PER_LAYER = 120


@dataclass
class Settings:
    """What the config gives (`given`: section → key → value, only keys it sets) and what the
    rules derive, as the same mapping; `lines` say what each choice came from."""

    given: dict[str, dict]
    derived: dict[str, dict] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    steps: int | None = None  # the planned training steps, once derived

    def get(self, section: str, key: str):
        """The key's value: the config's, else the derived one (None before it is derived)."""
        if self.is_given(section, key):
            return self.given[section][key]
        return self.derived.get(section, {}).get(key)

    def is_given(self, section: str, key: str) -> bool:
        return key in self.given.get(section, {})

    def set(self, section: str, key: str, value) -> None:
        """Derive `value` for the key unless the config gives one."""
        if not self.is_given(section, key):
            self.derived.setdefault(section, {})[key] = value


def vocab_size(texts: TextFigures) -> int:
    """A quarter of the word types, rounded to 500, ≥ twice the distinct characters, in
    [1000, 32000]."""
    size = round(texts.types / 4 / 500) * 500
    size = max(size, 2 * texts.distinct_chars)
    return int(min(max(size, 1000), 32000))


def batch_tokens(tokens: TokenFigures, *, gpu: bool) -> int:
    """The largest power of two at most an epoch's batch tokens / `STEPS_PER_EPOCH`, within the
    device's bounds."""
    low, high = (2048, 16384) if gpu else (1024, 4096)
    wanted = max(tokens.batch_tokens / STEPS_PER_EPOCH, 1)
    largest = 2 ** math.floor(math.log2(wanted))
    return int(min(max(largest, low), high))


def min_epochs(pairs: int) -> int:
    """The fewest epochs a model should train on a corpus of `pairs`: 12 at 30,000 pairs, more
    for fewer pairs (at most 20), fewer for more (at least 2)."""
    return int(min(max(round(12 * math.sqrt(30_000 / max(pairs, 1))), 2), 20))


def default_epochs(pairs: int) -> int:
    """Epochs without any budget: 40 at 30,000 pairs, more for fewer (at most 100), fewer for
    more (at least 5)."""
    return int(min(max(round(40 * math.sqrt(30_000 / max(pairs, 1))), 5), 100))


def dropout(pairs: int, epochs: float) -> float:
    """Residual dropout: 0.1 for corpora of 100,000 pairs or more, and for smaller ones trained
    for at most 25 epochs; 0.2 up to 50 epochs; 0.3 beyond."""
    if pairs >= 100_000 or epochs <= 25:
        return 0.1
    return 0.2 if epochs <= 50 else 0.3


def peak_rate(d_model: int) -> float:
    """1e-3 at d_model 256, inversely proportional to the width: 2e-3 at 128 (the toy recipe's),
    5e-4 at 512 (the usual peak of the base model on small corpora)."""
    return float(f"{1e-3 * 256 / d_model:.2g}")


def warmup(steps: int, layers: int) -> int:
    """8% of the steps, at least `WARMUP_PER_LAYER` a layer of the two stacks but never more than
    a quarter of the steps, at most 4000."""
    wanted = max(round(0.08 * steps), WARMUP_PER_LAYER * layers)
    return max(min(wanted, steps // 4, 4000), 1)


def shape_of(settings: Settings, rung: Shape) -> Shape:
    """`rung` with the shape keys the config gives; a given d_model without heads or d_ff gets
    d_model/64 heads (at least 4, dividing it) and d_ff = 4 · d_model."""
    keys = rung.keys()
    given = {
        k: settings.given.get("model", {})[k] for k in SHAPE_KEYS if settings.is_given("model", k)
    }
    if "d_model" in given:
        d = given["d_model"]
        keys["n_heads"] = next(h for h in (d // 64, 8, 4, 2, 1) if h >= 1 and d % h == 0)
        keys["d_ff"] = 4 * d
    keys.update(given)
    return Shape("given" if given else rung.name, **keys)


class Clock(Protocol):
    """How long things take on this device, measured: seconds of one step of a shape at a
    batch size, and of one validation of a shape (`calibration.Calibration`)."""

    def step_seconds(self, shape: Shape, max_tokens: int) -> float: ...

    def validation_seconds(self, shape: Shape) -> float: ...


def derive(
    settings: Settings,
    texts: TextFigures,
    tokens: TokenFigures,
    *,
    batches_per_epoch: Callable[[int], int],
    gpu: bool,
    minutes: float | None,
    clock: Clock | None,
    bleu_ready: bool = True,
    fits: Callable[[Shape, int], bool] | None = None,
) -> None:
    """Apply the rules (module docstring) to every recipe key `settings` does not give, after
    the vocabulary (derived before BPE; see `plan.py`). `clock` times steps under a time
    budget (`minutes`), and is None without one; `bleu_ready` says whether sacreBLEU's
    tokenizer for the target language is installed; `fits(shape, max_tokens)` whether training a
    shape fits in the device's memory (a rung that does not is never chosen)."""
    settings.set("train", "max_tokens", batch_tokens(tokens, gpu=gpu))
    max_tokens = settings.get("train", "max_tokens")
    per_epoch = max(batches_per_epoch(max_tokens), 1)
    top = largest_for(tokens.tgt_tokens)
    while top > 0 and fits is not None and not fits(LADDER[top], max_tokens):
        settings.lines.append(f"model {LADDER[top].name} left out: it does not fit in memory")
        top -= 1
    shape, steps, length = _shape_and_length(settings, tokens, per_epoch, minutes, clock, top)
    for key, value in shape.keys().items():
        settings.set("model", key, value)
    epochs = steps / per_epoch
    settings.steps = steps
    if epochs < 1 and length.startswith("train.max_minutes"):
        settings.warnings.append(
            f"train.max_minutes={minutes:g} gives {steps:,} steps of the smallest model, less "
            f"than one epoch ({per_epoch} steps): the model will not be usable; give it at "
            f"least {(minutes or 0) * per_epoch * min_epochs(tokens.pairs) / steps:.0f} minutes"
        )
    settings.lines.append(
        f"model {shape.describe()}: {shape.parameters(settings.get('tokenizer', 'vocab_size')):,}"
        f" parameters; {length}: {steps:,} steps of {max_tokens} batch tokens, "
        f"{epochs:.1f} epochs of {per_epoch} steps"
    )
    settings.set("model", "dropout", dropout(tokens.pairs, epochs))
    settings.set("train", "label_smoothing", 0.1)
    settings.set("train", "lr", peak_rate(settings.get("model", "d_model")))
    warm = warmup(steps, shape.n_encoder_layers + shape.n_decoder_layers)
    settings.set("train", "warmup_steps", warm)
    if not settings.is_given("train", "warmup_steps"):  # a hand-set warm-up keeps §5.3's decay
        settings.set("train", "schedule", "cosine")
    if settings.get("train", "schedule") == "cosine":
        settings.set("train", "decay_steps", max(steps - settings.get("train", "warmup_steps"), 1))
    validations = _validations(settings, shape, minutes, clock)
    every = max(math.ceil(steps / validations), 1)
    settings.set("train", "validate_every", every)
    planned = max(steps // settings.get("train", "validate_every"), 1)
    cosine = settings.get("train", "schedule") == "cosine"  # planned to its end: no early stop
    settings.set("train", "patience", planned // 2 if planned >= 6 and not cosine else None)
    checkpoint = max(round(CHECKPOINT_SHARE * steps), 1)
    settings.set("train", "checkpoint_every", checkpoint)
    average = AVERAGE if steps >= AVERAGE * checkpoint * 4 else 1
    settings.set("train", "average_last", average)
    settings.set("train", "keep_last", max(average * 2, 3))
    settings.set("decoding", "beam_size", 5)
    settings.set("train", "early_stopping_metric", "bleu" if bleu_ready else "chrf")


def _shape_and_length(
    settings: Settings,
    tokens: TokenFigures,
    per_epoch: int,
    minutes: float | None,
    clock: Clock | None,
    top: int,
) -> tuple[Shape, int, str]:
    """The model's shape and the planned steps, with the budget they came from. A step or epoch
    budget the config gives is the length (a time limit beside it stays a limit); a time budget
    alone is divided by the timed step."""
    t = settings.given.get("train", {})
    max_tokens = settings.get("train", "max_tokens")
    counted = [n for n in (t.get("max_steps"), _epoch_steps(t.get("max_epochs"), per_epoch)) if n]
    shape, timed, seconds = shape_of(settings, LADDER[top]), None, 0.0
    if minutes is not None and clock is not None and shape.name != "given":
        fewest = min_epochs(tokens.pairs)
        per_layer = math.ceil(TOKENS_PER_LAYER / max_tokens)
        for index in range(top, -1, -1):
            shape = shape_of(settings, LADDER[index])
            timed, seconds = _timed_steps(clock, shape, max_tokens, minutes)
            layers = max(shape.n_encoder_layers, shape.n_decoder_layers)
            needed = max(fewest * per_epoch, per_layer * layers)
            if timed >= needed or index == 0:
                break
            settings.lines.append(
                f"model {shape.name} left out: {timed:,} steps at {seconds:.2f} s, fewer than its "
                f"{needed:,} ({fewest} epochs; {per_layer:,} steps of {max_tokens} tokens a layer)"
            )
    elif minutes is not None and clock is not None and not counted:
        timed, seconds = _timed_steps(clock, shape, max_tokens, minutes)
    if counted:
        if not t.get("max_epochs") and "max_epochs" not in t:
            settings.set("train", "max_epochs", None)
        return shape, min(counted), _given_length(t)
    if timed is not None:
        settings.set("train", "max_steps", timed)
        settings.set("train", "max_epochs", None)
        return shape, timed, f"train.max_minutes={minutes:g} at {seconds:.2f} s a step"
    epochs = default_epochs(tokens.pairs)
    settings.set("train", "max_epochs", epochs)
    settings.set("train", "max_steps", None)
    return shape, epochs * per_epoch, f"{epochs} epochs (no budget given)"


def _timed_steps(clock: Clock, shape: Shape, max_tokens: int, minutes: float) -> tuple[int, float]:
    """The steps of `shape` that fit in `minutes` with its validations, and its step's seconds."""
    seconds = clock.step_seconds(shape, max_tokens)
    validating = min(VALIDATIONS * clock.validation_seconds(shape), VALIDATION_SHARE * minutes * 60)
    return max(int(TIME_MARGIN * (minutes * 60 - validating) / seconds), 1), seconds


def _epoch_steps(epochs: int | None, per_epoch: int) -> int | None:
    return None if epochs is None else epochs * per_epoch


def _given_length(train: dict) -> str:
    given = [f"train.{k}={train[k]}" for k in ("max_steps", "max_epochs") if train.get(k)]
    return ", ".join(given)


def _validations(
    settings: Settings, shape: Shape, minutes: float | None, clock: Clock | None
) -> int:
    """How many times to validate: `VALIDATIONS`, fewer when each validation would take more
    than its share of a time budget (at least 2)."""
    if minutes is None or clock is None or settings.is_given("train", "validate_every"):
        return VALIDATIONS
    each = clock.validation_seconds(shape)
    affordable = int(VALIDATION_SHARE * minutes * 60 / max(each, 1e-9))
    return max(min(VALIDATIONS, affordable), 2)

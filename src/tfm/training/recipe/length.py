"""The batch, the model's shape and the run's length: the ladder walked under a time budget, the
epochs a corpus is worth, and the steps a budget gives.

- batch: `rules.batch_tokens`, from the tokens of an epoch; on a CPU, where a time budget buys
  the chosen shape fewer than `min_epochs`, with twice the steps an epoch (the shape re-timed).
- model: the largest rung of the ladder (`ladder.py`) that the corpus has enough target tokens
  for, whose training fits in the device's memory and, under a time budget, that trains at
  least `min_epochs` in it and at least `TOKENS_PER_LAYER` batch tokens per layer of its stacks
  (a deeper stack needs more training before it overtakes a shallower one); each smaller rung
  is timed in turn until one does. Shape keys the config gives are kept on every rung (a given
  d_model brings its heads and d_ff), and only a config that gives all five skips the ladder.
- length: the steps of a given `train.max_steps` or `train.max_epochs` (the fewer); under a
  time budget alone, the steps that fit at the timed step with the planned validations, at most
  `most_epochs` (the plan then says the budget is more than the corpus can use); without any
  budget, `default_epochs`.

An epoch's steps count the batches an optimizer step takes (`train.accumulate` × processes) and
the first `train.bidirectional_epochs` epochs twice over (they train every pair both ways).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tfm.data.batching import steps_in_epoch
from tfm.errors import ConfigError
from tfm.training.recipe import rules
from tfm.training.recipe.choices import Choice, Inputs, Settings
from tfm.training.recipe.ladder import GPU_ONLY, LADDER, SHAPE_KEYS, Shape, largest_for

TIME_MARGIN = 0.92  # of a time budget's training time planned for steps: the clock has noise
TOKENS_PER_LAYER = 2_048_000  # batch tokens a rung under a time budget needs per stack layer


@dataclass(frozen=True)
class Epochs:
    """Steps and epochs of one run: `per_epoch` optimizer steps an epoch, and the first
    `both_ways` epochs twice as many."""

    per_epoch: int
    both_ways: int = 0

    def steps(self, epochs: float) -> int:
        return round(self.per_epoch * (epochs + min(epochs, self.both_ways)))

    def of(self, steps: int) -> float:
        doubled = 2 * self.both_ways * self.per_epoch
        if steps <= doubled:
            return steps / (2 * self.per_epoch)
        return self.both_ways + (steps - doubled) / self.per_epoch


@dataclass(frozen=True)
class Timed:
    """What a time budget gives a shape: its steps, a step's seconds (accumulation included)
    and the seconds planned for validating."""

    steps: int
    seconds: float
    validating: float
    each: float  # seconds of one validation


def shape_and_length(s: Settings, f: Inputs) -> None:
    """Derive `train.max_tokens`, the shape keys, `train.max_steps` and `train.max_epochs`
    (module docstring), and record the planned steps and epochs in `s`."""
    s.choose("train.max_tokens", _batch(s, f))
    epochs = _epochs(s, f)
    shape, why, timed = _walk(s, f, epochs, _top_rung(s, f, s.get("train", "max_tokens")))
    few = _few_epochs(s, f, epochs, timed)
    smaller = _batch(s, f, few) if few is not None else None
    if smaller is not None and smaller.value != s.get("train", "max_tokens"):
        s.lines.append(f"batch halved to {smaller.value:,} tokens: {few}")
        s.choose("train.max_tokens", smaller)
        epochs, timed = _epochs(s, f), _timed(s, f, shape)
    max_tokens, per_epoch = s.get("train", "max_tokens"), epochs.per_epoch
    for key, value in shape.keys().items():
        s.choose(f"model.{key}", Choice(value, why[key]))
    steps, length = _length(s, f, epochs, timed)
    s.steps, s.epochs, s.steps_an_epoch = steps, epochs.of(steps), per_epoch
    if s.epochs < 1 and timed is not None:
        s.warnings.append(
            f"train.max_minutes={f.minutes:g} gives {steps:,} steps of the smallest model, less "
            f"than one epoch ({per_epoch} steps): the model will not be usable; give it at "
            f"least {(f.minutes or 0) * per_epoch * rules.min_epochs(f.tokens.pairs) / steps:.0f}"
            " minutes"
        )
    s.lines.append(
        f"model {_named(s, shape)}: {shape.parameters(s.get('tokenizer', 'vocab_size')):,} "
        f"parameters; {length}: {steps:,} steps of {max_tokens} batch tokens, {s.epochs:.1f} "
        f"epochs of {per_epoch} steps"
    )
    if epochs.both_ways:
        s.notes.append(f"train.bidirectional_epochs={epochs.both_ways}: those epochs count twice")
    if f.compiled and timed is not None:
        s.notes.append("train.compile: the steps were timed uncompiled; the run re-times itself")


def _batch(s: Settings, f: Inputs, few_epochs: str | None = None) -> Choice:
    per_step = (s.given_train("accumulate") or 1) * f.world_size
    return rules.batch_tokens(
        round(f.tokens.batch_tokens * f.batch_share), gpu=f.gpu, batches_a_step=per_step,
        few_epochs=few_epochs, whose="the main pair's " if f.batch_share < 1 else "",
    )  # fmt: skip


def _epochs(s: Settings, f: Inputs) -> Epochs:
    """The steps an epoch of the planned batch makes."""
    batches = f.batches_per_epoch(s.get("train", "max_tokens"))
    accumulate = s.given_train("accumulate") or 1
    per_epoch = max(steps_in_epoch(batches, accumulate=accumulate, world_size=f.world_size), 1)
    return Epochs(per_epoch, s.given_train("bidirectional_epochs") or 0)


def _few_epochs(s: Settings, f: Inputs, epochs: Epochs, timed: Timed | None) -> str | None:
    """Why a CPU's time budget buys the shape fewer epochs than its corpus needs
    (`rules.min_epochs`), where the budget alone sets the length; else None."""
    counted = s.given_train("max_steps") or s.given_train("max_epochs")
    if f.gpu or timed is None or counted or s.is_given("train", "max_tokens"):
        return None
    bought, needed = epochs.of(timed.steps), rules.min_epochs(f.tokens.pairs)
    if bought >= needed:
        return None
    return (
        f"train.max_minutes={f.minutes:g} buys {bought:.1f} epochs, fewer than the {needed} "
        f"that {f.tokens.pairs:,} pairs need"
    )


def _named(s: Settings, shape: Shape) -> str:
    """`shape` described by where it came from: a rung, a rung with some keys the config gives,
    or the config's own shape (all its keys given)."""
    given = [key for key in SHAPE_KEYS if s.is_given("model", key)]
    if len(given) == len(SHAPE_KEYS):
        return f"as given {shape.dimensions()}"
    if given:
        return f"{shape.name} with the given {', '.join(given)} {shape.dimensions()}"
    return shape.describe()


def _top_rung(s: Settings, f: Inputs, max_tokens: int) -> int:
    """The largest rung the corpus's target tokens support that fits in memory."""
    top = largest_for(f.tokens.tgt_tokens, gpu=f.gpu)
    while top > 0 and f.fits is not None and not f.fits(LADDER[top], max_tokens):
        s.lines.append(f"model {LADDER[top].name} left out: it does not fit in memory")
        top -= 1
    return top


def shape_of(s: Settings, rung: Shape) -> tuple[Shape, dict[str, str]]:
    """`rung` with the shape keys the config gives, and each derived key's reason; a given
    d_model brings its heads (`rules.heads`) and d_ff = 4 · d_model. A given n_heads that does
    not divide the rung's d_model is a ConfigError: the width is the user's to choose."""
    keys, why = rung.keys(), {key: f"rung {rung.name}" for key in SHAPE_KEYS}
    given = {k: s.given["model"][k] for k in SHAPE_KEYS if s.is_given("model", k)}
    if "d_model" in given:
        heads = rules.heads(given["d_model"])
        keys["n_heads"], why["n_heads"] = heads.value, heads.rule
        d_model = given["d_model"]
        keys["d_ff"], why["d_ff"] = 4 * d_model, f"4 · the given d_model {d_model}"
    keys.update(given)
    if keys["d_model"] % keys["n_heads"]:  # only where n_heads is given and d_model is not
        raise ConfigError(
            f"model.n_heads={keys['n_heads']} does not divide the d_model {keys['d_model']} of "
            f"the planned model {rung.name}: give model.d_model too (a multiple of "
            f"{keys['n_heads']}), or leave model.n_heads to the recipe"
        )
    return Shape(rung.name, **keys), why


def _walk(s: Settings, f: Inputs, epochs: Epochs, top: int):
    """The shape, each derived shape key's reason, and what the time budget gives it (None
    without a time budget or where a given length makes timing needless)."""
    tokens, pairs = f.tokens.tgt_tokens, f.tokens.pairs
    supported = f"the largest rung {tokens:,} target tokens support (1 per 20 weights)"
    if top < largest_for(tokens, gpu=f.gpu):
        supported += " that fits in memory"
    if not f.gpu and largest_for(tokens, gpu=True) > largest_for(tokens, gpu=False):
        supported += f" ({', '.join(GPU_ONLY)} only on a GPU)"
    counted = s.given_train("max_steps") or s.given_train("max_epochs")
    all_given = all(s.is_given("model", k) for k in SHAPE_KEYS)
    if f.minutes is None or f.clock is None or (all_given and counted):
        shape, why = shape_of(s, LADDER[top])
        return shape, _because(why, supported), None
    fewest = rules.min_epochs(pairs)
    tokens_a_step = s.get("train", "max_tokens") * (s.given_train("accumulate") or 1)
    per_layer = math.ceil(TOKENS_PER_LAYER / (tokens_a_step * f.world_size))
    for index in range(top, -1, -1):
        shape, why = shape_of(s, LADDER[index])
        timed = _timed(s, f, shape)
        needed = max(epochs.steps(fewest), per_layer * shape.layers)
        if timed.steps >= needed or index == 0 or all_given:
            break
        s.lines.append(
            f"model {shape.name} left out: {timed.steps:,} steps at {timed.seconds:.2f} s, fewer "
            f"than its {needed:,} ({fewest} epochs; {per_layer:,} steps of {tokens_a_step} "
            "tokens a layer)"
        )
    rule = (
        f"{supported}, timed here to train {fewest} epochs and {per_layer:,} steps a layer in "
        f"train.max_minutes={f.minutes:g}"
    )
    return shape, _because(why, rule), timed


def _because(why: dict[str, str], rule: str) -> dict[str, str]:
    """The reasons with a rung's name written out as the rule that chose the rung."""
    return {k: f"{v}: {rule}" if v.startswith("rung ") else v for k, v in why.items()}


def _timed(s: Settings, f: Inputs, shape: Shape) -> Timed:
    """The steps of `shape` that fit in the time budget with its validations (decoded as
    planned: with the beam, or greedily), with `TIME_MARGIN` for the clock's noise."""
    assert f.clock is not None and f.minutes is not None
    budget = f.minutes * 60
    accumulate = s.given_train("accumulate") or 1
    seconds = f.clock.step_seconds(shape, s.get("train", "max_tokens")) * accumulate
    each = f.clock.validation_seconds(shape, s.beam_width())
    validating = min(rules.VALIDATIONS * each, rules.VALIDATION_SHARE * budget)
    steps = max(int(TIME_MARGIN * (budget - validating) / seconds), 1)
    return Timed(steps, seconds, validating, each)


def _length(s: Settings, f: Inputs, epochs: Epochs, timed: Timed | None) -> tuple[int, str]:
    """The planned steps and the words for where they came from; chooses train.max_steps and
    train.max_epochs."""
    given_steps, given_epochs = s.given_train("max_steps"), s.given_train("max_epochs")
    counted = [n for n in (given_steps, given_epochs and epochs.steps(given_epochs)) if n]
    if counted:
        given = ", ".join(
            f"train.{k}={v}" for k, v in (("max_steps", given_steps), ("max_epochs", given_epochs))
            if v
        )  # fmt: skip
        s.choose("train.max_steps", Choice(None, f"{given} sets the length"))
        s.choose("train.max_epochs", Choice(None, f"{given} sets the length"))
        return min(counted), given
    if timed is not None:
        return _timed_length(s, f, epochs, timed)
    default = rules.default_epochs(f.tokens.pairs)
    why = f"no budget given: {default} epochs for {f.tokens.pairs:,} pairs (40 at 30,000)"
    s.choose("train.max_epochs", Choice(default, why))
    s.choose("train.max_steps", Choice(None, "no budget given: the epochs are the length"))
    return epochs.steps(default), f"{default} epochs (no budget given)"


def _timed_length(s: Settings, f: Inputs, epochs: Epochs, timed: Timed) -> tuple[int, str]:
    bound = rules.most_epochs(f.tokens.pairs)
    most = bound.value
    ceiling = s.ceiling = epochs.steps(most)
    s.validation_seconds = timed.each
    at = f"train.max_minutes={f.minutes:g} at {timed.seconds:.2f} s a step"
    s.choose("train.max_epochs", Choice(None, "the time budget sets the length"))
    if timed.steps <= ceiling:
        why = (
            f"{at}, {timed.validating:.0f} s of validations, {TIME_MARGIN:.0%} of the rest; "
            "re-timed as the run goes"
        )
        s.choose("train.max_steps", Choice(timed.steps, why))
        return timed.steps, at
    why = (
        f"{most} epochs, {bound.rule}; the budget gives {timed.steps:,} steps, "
        f"{epochs.of(timed.steps):,.0f} epochs"
    )
    s.choose("train.max_steps", Choice(ceiling, why))
    minutes = (ceiling * timed.seconds + timed.validating) / 60 / TIME_MARGIN
    s.notes.append(
        f"the budget is more than this corpus can use: {most} epochs ({ceiling:,} steps) take "
        f"about {minutes:.0f} of the {f.minutes:g} minutes; more data would use the rest "
        "(a larger model would learn these pairs by heart)"
    )
    return ceiling, f"{most} epochs (the most {f.tokens.pairs:,} pairs are worth)"

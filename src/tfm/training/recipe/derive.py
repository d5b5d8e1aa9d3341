"""The recipe as a table: one rule for each key a config leaves unset, applied in dependency order.

    settings = Settings(given=given_keys(config))
    derive(settings, inputs)       # inputs: the corpus's figures, the device, the budget, a clock
    settings.derived               # section → key → value, for every key the config leaves out
    settings.reasons               # dotted key → the rule and its figures

`RULES` lists each rule with the keys it derives and the keys it reads (`needs`); a rule reads
only keys derived or given before it. A key the config gives is never changed, and the rules
after it use the config's value (a config that sets `model.d_model` still gets a peak rate and a
warm-up derived for that width). The rules themselves are in `rules.py`, the model and the
length in `length.py`; the vocabulary is derived from the raw pairs before BPE
(`derive_vocabulary`, called by `plan.py`), every other key from the encoded corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tfm.data.corpus_figures import TextFigures
from tfm.training.recipe import rules
from tfm.training.recipe.choices import Choice, Inputs, Settings
from tfm.training.recipe.ladder import SHAPE_KEYS, Shape
from tfm.training.recipe.length import shape_and_length


@dataclass(frozen=True)
class Rule:
    """One row of the table: the keys `apply` derives (one, but for the shape and length), from
    the keys it reads (`needs`) and the figures of `Inputs`."""

    keys: tuple[str, ...]
    needs: tuple[str, ...]
    apply: Callable[[Settings, Inputs], None]


def one(key: str, needs: tuple[str, ...], choose: Callable[[Settings, Inputs], Choice]) -> Rule:
    """The row of a rule that derives one key: its `choose` gives the value and its reason."""

    def apply(s: Settings, f: Inputs) -> None:
        s.choose(key, choose(s, f))

    return Rule((key,), needs, apply)


def derive_vocabulary(s: Settings, texts: TextFigures) -> None:
    """The first rule, applied to the raw pairs before BPE (which it sizes)."""
    s.choose("tokenizer.vocab_size", rules.vocab_size(texts))


def _schedule(s: Settings, f: Inputs) -> Choice:
    if s.is_given("train", "warmup_steps"):  # a hand recipe's warm-up belongs to §5.3's decay
        return Choice("inverse_sqrt", "train.warmup_steps given: §5.3's decay (leave both out "
                                      "for the cosine)")  # fmt: skip
    return Choice("cosine", "cosine to 30% of the peak at the planned end")


def _decay(s: Settings, f: Inputs) -> Choice:
    if s.get("train", "schedule") != "cosine":
        return Choice(None, "no cosine decay")
    decay = max((s.steps or 1) - s.get("train", "warmup_steps"), 1)
    return Choice(decay, f"{s.steps:,} planned steps − warm-up")


def _validate_every(s: Settings, f: Inputs) -> Choice:
    steps, affordable = s.steps or 1, None
    if f.minutes is not None and f.clock is not None:
        each = f.clock.validation_seconds(_shape(s), s.beam_width())
        affordable = int(rules.VALIDATION_SHARE * f.minutes * 60 / max(each, 1e-9))
    return rules.validations(steps, affordable=affordable)


def _checkpoint_cadence(s: Settings) -> int:
    return s.get("train", "checkpoint_every") or s.get("train", "validate_every")


def _shape(s: Settings) -> Shape:
    return Shape("planned", **{k: s.get("model", k) for k in SHAPE_KEYS})


def _layers(s: Settings) -> int:
    return s.get("model", "n_encoder_layers") + s.get("model", "n_decoder_layers")


_SHAPE = tuple(f"model.{k}" for k in SHAPE_KEYS)
_LENGTH = ("train.max_steps", "train.max_epochs")
VOCABULARY = ("tokenizer.vocab_size",)  # derived first, by `derive_vocabulary`
RULES = (
    one("decoding.strategy", (), lambda s, f: rules.strategy()),
    one("decoding.beam_size", (), lambda s, f: Choice(rules.BEAM, "beam 5 (§6.1; 10 gained "
                                                      "no more)")),
    # The batch, the model and the length are one rule: the ladder is walked by timing each
    # rung's steps, and a budget of too few epochs on a CPU halves the batch
    Rule(("train.max_tokens", *_SHAPE, *_LENGTH), ("tokenizer.vocab_size", "decoding.strategy",
                                                   "decoding.beam_size"), shape_and_length),
    one("model.dropout", _LENGTH, lambda s, f: rules.dropout(f.tokens.pairs, s.epochs or 0.0)),
    one("train.label_smoothing", (), lambda s, f: Choice(0.1, "ε_ls 0.1 (§5.4)")),
    one("train.lr", ("model.d_model",), lambda s, f: rules.peak_rate(s.get("model", "d_model"))),
    one("train.warmup_steps", (*_LENGTH, "model.n_encoder_layers", "model.n_decoder_layers"),
        lambda s, f: rules.warmup(s.steps or 1, _layers(s))),
    one("train.schedule", ("train.warmup_steps",), _schedule),
    one("train.decay_steps", (*_LENGTH, "train.warmup_steps", "train.schedule"), _decay),
    one("train.validate_every", (*_LENGTH, *_SHAPE, "decoding.strategy", "decoding.beam_size"),
        _validate_every),
    one("train.patience", (*_LENGTH, "train.validate_every"),
        lambda s, f: rules.patience(s.steps or 1, s.get("train", "validate_every"))),
    one("train.early_stopping_metric", (), lambda s, f: rules.metric(bleu_ready=f.bleu_ready)),
    one("train.checkpoint_every", _LENGTH, lambda s, f: rules.checkpoint_every(s.steps or 1)),
    one("train.average_last", (*_LENGTH, "train.checkpoint_every", "train.validate_every"),
        lambda s, f: rules.average_last(s.steps or 1, _checkpoint_cadence(s))),
    one("train.keep_last", ("train.average_last",),
        lambda s, f: rules.keep_last(s.get("train", "average_last"))),
)  # fmt: skip


def derive(settings: Settings, inputs: Inputs, table: tuple[Rule, ...] = RULES) -> None:
    """Apply the rows of `table` in order (a key the config gives stays as given; the rows after
    it read the config's value)."""
    for rule in table:
        rule.apply(settings, inputs)

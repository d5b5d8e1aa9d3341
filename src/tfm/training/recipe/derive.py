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
    """One row of the table: the keys `apply` derives and the keys it reads."""

    keys: tuple[str, ...]
    needs: tuple[str, ...]
    apply: Callable[[Settings, Inputs], None]


def derive_vocabulary(s: Settings, texts: TextFigures) -> None:
    """The first rule, applied to the raw pairs before BPE (which it sizes)."""
    s.choose("tokenizer.vocab_size", rules.vocab_size(texts))


def _batch(s: Settings, f: Inputs) -> None:
    per_step = (s.given_train("accumulate") or 1) * f.world_size
    s.choose("train.max_tokens", rules.batch_tokens(f.tokens.batch_tokens, gpu=f.gpu,
                                                    batches_a_step=per_step))  # fmt: skip


def _beam(s: Settings, f: Inputs) -> None:
    s.choose("decoding.strategy", Choice("beam", "beam search (§6.1): +0.3–0.8 BLEU over greedy"))
    s.choose("decoding.beam_size", Choice(rules.BEAM, "beam 5 (§6.1; 10 gained no more)"))


def _regularisation(s: Settings, f: Inputs) -> None:
    s.choose("model.dropout", rules.dropout(f.tokens.pairs, s.epochs or 0.0))
    s.choose("train.label_smoothing", Choice(0.1, "ε_ls 0.1 (§5.4)"))


def _rate(s: Settings, f: Inputs) -> None:
    s.choose("train.lr", rules.peak_rate(s.get("model", "d_model")))
    layers = s.get("model", "n_encoder_layers") + s.get("model", "n_decoder_layers")
    s.choose("train.warmup_steps", rules.warmup(s.steps or 1, layers))
    if s.is_given("train", "warmup_steps"):  # a hand recipe's warm-up belongs to §5.3's decay
        why = "train.warmup_steps given: §5.3's decay (leave both out for the cosine)"
        s.choose("train.schedule", Choice("inverse_sqrt", why))
    else:
        s.choose("train.schedule", Choice("cosine", "cosine to 30% of the peak at the planned end"))
    if s.get("train", "schedule") == "cosine":
        decay = max((s.steps or 1) - s.get("train", "warmup_steps"), 1)
        s.choose("train.decay_steps", Choice(decay, f"{s.steps:,} planned steps − warm-up"))
    else:
        s.choose("train.decay_steps", Choice(None, "no cosine decay"))


def _validation(s: Settings, f: Inputs) -> None:
    steps = s.steps or 1
    affordable = None
    if f.minutes is not None and f.clock is not None:
        each = f.clock.validation_seconds(_shape(s), s.get("decoding", "beam_size"))
        affordable = int(rules.VALIDATION_SHARE * f.minutes * 60 / max(each, 1e-9))
    s.choose("train.validate_every", rules.validations(steps, affordable=affordable))
    s.choose("train.patience", rules.patience(steps // s.get("train", "validate_every")))
    metric = "bleu" if f.bleu_ready else "chrf"
    why = "BLEU" if f.bleu_ready else "chrF: sacreBLEU cannot split the target language's words"
    s.choose("train.early_stopping_metric", Choice(metric, why))


def _checkpoints(s: Settings, f: Inputs) -> None:
    steps = s.steps or 1
    s.choose("train.checkpoint_every", rules.checkpoint_every(steps))
    every = s.get("train", "checkpoint_every") or s.get("train", "validate_every")
    s.choose("train.average_last", rules.average_last(steps, every))
    average = s.get("train", "average_last")
    s.choose("train.keep_last", Choice(max(average * 2, 3), f"twice the {average} averaged, ≥ 3"))


def _shape(s: Settings) -> Shape:
    return Shape("planned", **{k: s.get("model", k) for k in SHAPE_KEYS})


_SHAPE = tuple(f"model.{k}" for k in SHAPE_KEYS)
VOCABULARY = ("tokenizer.vocab_size",)  # derived first, by `derive_vocabulary`
RULES = (
    Rule(("train.max_tokens",), (), _batch),
    Rule(("decoding.strategy", "decoding.beam_size"), (), _beam),
    Rule((*_SHAPE, "train.max_steps", "train.max_epochs"),
         ("tokenizer.vocab_size", "train.max_tokens", "decoding.beam_size"), shape_and_length),
    Rule(("model.dropout", "train.label_smoothing"), ("train.max_steps",), _regularisation),
    Rule(("train.lr", "train.warmup_steps", "train.schedule", "train.decay_steps"),
         ("model.d_model", "model.n_encoder_layers", "train.max_steps"), _rate),
    Rule(("train.validate_every", "train.patience", "train.early_stopping_metric"),
         ("train.max_steps", "decoding.beam_size", *_SHAPE), _validation),
    Rule(("train.checkpoint_every", "train.average_last", "train.keep_last"),
         ("train.max_steps", "train.validate_every"), _checkpoints),
)  # fmt: skip


def derive(settings: Settings, inputs: Inputs, table: tuple[Rule, ...] = RULES) -> None:
    """Apply the rules of `table` in order (a rule leaves the keys the config gives as given)."""
    for rule in table:
        rule.apply(settings, inputs)

"""The recipe's rules on measured figures: each derived setting against its rule, what a config
gives always kept, a time budget divided by the timed step, and no derived plan that the start
checks would warn about, from 300 pairs to a million."""

import math

import pytest

from tfm.config import Config
from tfm.training.recipe.checks import check_settings, checkpoints_kept
from tfm.training.recipe.derive import (
    Settings,
    batch_tokens,
    default_epochs,
    derive,
    dropout,
    min_epochs,
    peak_rate,
    vocab_size,
    warmup,
)
from tfm.training.recipe.fingerprint import SideFigures, TextFigures, TokenFigures, measure_tokens
from tfm.training.recipe.ladder import LADDER, largest_for
from tfm.training.recipe.plan import with_values

LATIN = SideFigures(words=8, chars=40, types=0, distinct_chars=0, scripts=(("LATIN", 1.0),))


def texts(pairs: int, types: int, chars: int = 100) -> TextFigures:
    side = SideFigures(8, 40, types // 2, chars // 2, (("LATIN", 1.0),))
    return TextFigures(pairs=pairs, src=side, tgt=side, identical=0.0)


def tokens(pairs: int, per_sentence: float = 12.0) -> TokenFigures:
    n = int(pairs * per_sentence)
    return TokenFigures(pairs, per_sentence, per_sentence, 20, 20, n, n + 2 * pairs)


def planned(pairs: int, *, given=None, minutes=None, clock=None, per_epoch=None) -> Settings:
    settings = Settings(given=given or {})
    settings.set("tokenizer", "vocab_size", 4000)
    figures = tokens(pairs)
    batches = per_epoch or (lambda max_tokens: math.ceil(figures.batch_tokens / max_tokens))
    derive(settings, texts(pairs, 10_000), figures, batches_per_epoch=batches, gpu=False,
           minutes=minutes, clock=clock)  # fmt: skip
    return settings


def test_vocabulary_is_a_quarter_of_the_word_types_within_bounds():
    assert vocab_size(texts(10_000, 16_997)) == 4000  # 16,997 / 4 = 4,249, rounded to 500
    assert vocab_size(texts(100, 800)) == 1000  # the floor
    assert vocab_size(texts(10**7, 10**6)) == 32000  # the ceiling
    assert vocab_size(texts(10_000, 8_000, chars=2_600)) == 5200  # twice the characters


def test_batch_gives_an_epoch_at_least_100_steps_within_the_device_bounds():
    assert batch_tokens(tokens(10_000), gpu=False) == 1024  # 140,000 / 100 = 1,400
    assert batch_tokens(tokens(20_000), gpu=False) == 2048  # 2,800: 4,096 would give 69 steps
    assert batch_tokens(tokens(30_000), gpu=False) == 4096  # 4,200
    assert batch_tokens(tokens(1_000), gpu=False) == 1024
    assert batch_tokens(tokens(10**6), gpu=False) == 4096
    assert batch_tokens(tokens(10**6), gpu=True) == 16384


def test_the_ladder_grows_with_the_target_tokens():
    assert [LADDER[largest_for(n)].name for n in (10_000, 100_000, 380_000, 10**8)] == [
        "xs", "s", "m", "base",
    ]  # fmt: skip
    assert all(a.weights() < b.weights() for a, b in zip(LADDER, LADDER[1:], strict=False))


def test_rate_warmup_and_decay_follow_the_planned_steps():
    settings = planned(30_000)  # no budget: 40 epochs
    t = settings.derived["train"]
    steps = settings.steps
    assert t["max_epochs"] == default_epochs(30_000) == 40 and t["max_steps"] is None
    layers = settings.get("model", "n_encoder_layers") + settings.get("model", "n_decoder_layers")
    assert t["warmup_steps"] == warmup(steps, layers) == max(round(0.08 * steps), 120 * layers)
    assert t["schedule"] == "cosine" and t["decay_steps"] == steps - t["warmup_steps"]
    assert t["lr"] == peak_rate(settings.get("model", "d_model"))
    assert peak_rate(256) == 1e-3 and peak_rate(512) == 5e-4 and peak_rate(128) == 2e-3
    assert (warmup(100, 4), warmup(1000, 4), warmup(10_000, 4), warmup(10**6, 6)) == (
        25, 250, 800, 4000,
    )  # fmt: skip
    assert t["validate_every"] == math.ceil(steps / 8)


def test_a_deeper_stack_warms_up_longer():
    # Multi30k's hour of m (3+3 layers): 8% of 3,242 steps is 259, too short for a post-norm stack
    # of six layers; 120 steps a layer give 720. Tatoeba's xs (2+2) plans are past their 480.
    assert warmup(3242, 6) == 720 and warmup(3242, 4) == 480 and warmup(3242, 2) == 259
    assert warmup(7000, 4) == 560 == round(0.08 * 7000)
    assert warmup(2000, 6) == 500  # never more than a quarter of the steps


def test_dropout_grows_with_the_epochs_a_small_corpus_gets():
    assert planned(1_000_000).derived["model"]["dropout"] == 0.1  # big: few epochs
    assert planned(30_000).derived["model"]["dropout"] == 0.2  # 40 epochs
    assert planned(5_000).derived["model"]["dropout"] == 0.3  # 98 epochs
    assert (dropout(29_000, 24), dropout(29_000, 26), dropout(29_000, 51)) == (0.1, 0.2, 0.3)


def test_the_best_model_is_chosen_by_chrf_where_bleu_cannot_tokenize_the_target():
    settings = Settings(given={})
    settings.set("tokenizer", "vocab_size", 4000)
    figures = tokens(10_000)
    derive(settings, texts(10_000, 9_000), figures, batches_per_epoch=lambda n: 60, gpu=False,
           minutes=None, clock=None, bleu_ready=False)  # fmt: skip
    assert settings.derived["train"]["early_stopping_metric"] == "chrf"
    assert planned(10_000).derived["train"]["early_stopping_metric"] == "bleu"


def test_what_the_config_gives_is_kept_and_the_rest_follows_it():
    given = {"model": {"d_model": 512}, "train": {"lr": 3e-4, "warmup_steps": 100}}
    settings = planned(30_000, given=given)
    model, train = settings.derived["model"], settings.derived["train"]
    assert "d_model" not in model and "lr" not in train and "warmup_steps" not in train
    assert model["n_heads"] == 8 and model["d_ff"] == 2048  # from the given width
    assert "schedule" not in train and "decay_steps" not in train  # a hand-set warm-up: §5.3
    assert settings.get("model", "d_model") == 512


class FakeClock:
    """Seconds a step grow with the shape's weights; a validation takes 10 s."""

    def __init__(self):
        self.timed = []

    def step_seconds(self, shape, max_tokens):
        self.timed.append(shape.name)
        return shape.weights() / 2e6

    def validation_seconds(self, shape):
        return 10.0


def test_a_time_budget_takes_the_largest_shape_that_trains_enough_epochs():
    fake = FakeClock()
    settings = planned(30_000, minutes=15, clock=fake, per_epoch=lambda max_tokens: 100)
    # m (0.5M tokens of data allow it) gives 2.75 s a step: 248 steps, 2.5 epochs < 12; s
    # gives 0.69 s: 1,101 steps, 11 epochs; xs 0.46 s: 1,653 steps, 16.5 epochs.
    assert fake.timed == ["m", "s", "xs"]
    assert settings.get("model", "n_encoder_layers") == 2  # xs
    seconds = LADDER[0].weights() / 2e6
    assert settings.steps == int(0.92 * (15 * 60 - 80) / seconds)
    assert settings.derived["train"]["max_steps"] == settings.steps
    assert settings.derived["train"]["max_epochs"] is None
    assert min_epochs(30_000) == 12


@pytest.mark.parametrize(
    ("minutes", "max_tokens", "chosen"), [(30, 2048, "xs"), (60, 2048, "s"), (30, 4096, "s")]
)
def test_a_deeper_shape_needs_two_million_batch_tokens_a_layer(minutes, max_tokens, chosen):
    """Under 30 minutes s trains 2,293 steps, its 12 epochs but under the 3,000 steps of 2,048
    tokens its three layers need, so xs is chosen; under 60 it trains 4,693 and is (m: 1,177
    steps, 11.8 epochs). Batches of 4,096 tokens need only 1,500 steps for s's layers."""
    fake = FakeClock()
    given = {"train": {"max_tokens": max_tokens}}
    settings = planned(30_000, given=given, minutes=minutes, clock=fake,
                       per_epoch=lambda max_tokens: 100)  # fmt: skip
    assert fake.timed[:2] == ["m", "s"]
    s_steps = int(0.92 * (minutes * 60 - 80) / (LADDER[1].weights() / 2e6))
    left_out = [line for line in settings.lines if line.startswith("model s left out")]
    assert (chosen == "xs") == bool(left_out)
    if left_out:
        assert left_out[0] == (f"model s left out: {s_steps:,} steps at 0.69 s, fewer than its "
                               "3,000 (12 epochs; 1,000 steps of 2048 tokens a layer)")  # fmt: skip
    else:
        assert settings.steps == s_steps
    assert settings.get("model", "n_encoder_layers") == {"xs": 2, "s": 3}[chosen]


def test_a_budget_too_short_for_the_smallest_shape_says_so():
    fake = FakeClock()
    settings = planned(30_000, minutes=0.5, clock=fake, per_epoch=lambda max_tokens: 100)
    assert len(settings.warnings) == 1
    assert settings.warnings[0].startswith("train.max_minutes=0.5 gives")
    assert "less than one epoch (100 steps): the model will not be usable" in settings.warnings[0]


@pytest.mark.parametrize("pairs", [300, 2_000, 10_000, 30_000, 200_000, 1_000_000])
def test_a_derived_plan_passes_every_start_check(pairs):
    settings = planned(pairs)
    config = with_values(Config(), settings.derived)
    assert check_settings(config, settings.steps) == []
    t = config.train
    assert t.warmup_steps < settings.steps and t.validate_every < settings.steps


def test_a_small_corpus_warms_up_validates_several_times_and_averages_what_exists():
    fake = FakeClock()
    settings = planned(2_000, minutes=15, clock=fake)
    config = with_values(Config(), settings.derived)
    t, steps = config.train, settings.steps
    assert t.warmup_steps < steps // 4 + 1
    assert steps // t.validate_every >= 4
    assert t.average_last > 1 and checkpoints_kept(config, steps) >= t.average_last


def test_start_checks_name_each_setting_that_cannot_work():
    config = Config.model_validate(
        {"train": {"warmup_steps": 800, "validate_every": 500, "patience": 5,
                   "average_last": 5, "keep_last": 10}}
    )  # fmt: skip
    found = check_settings(config, 150)
    assert [w.split("=")[0] for w in found] == [
        "train.warmup_steps", "train.validate_every", "train.patience", "train.average_last",
    ]  # fmt: skip
    assert "set it to about 15" in found[0] and "set it to about 18" in found[1]
    assert "only 0 validation(s) are planned in 150 steps" in found[2]
    assert "than the 1 the run will keep" in found[3]


def test_token_figures_count_framing_out_and_batches_at_the_longer_side():
    figures = measure_tokens([3, 5, 11], [4, 4, 12])  # src: ids + EOS; tgt: BOS + ids + EOS
    assert figures.src_mean == pytest.approx((2 + 4 + 10) / 3)
    assert figures.tgt_tokens == 2 + 2 + 10
    assert figures.batch_tokens == 4 + 5 + 12  # the longer framed side of each pair


def test_a_shape_that_does_not_fit_in_memory_is_never_chosen():
    settings = Settings(given={})
    settings.set("tokenizer", "vocab_size", 8000)
    figures = tokens(1_000_000)  # enough tokens for the base model
    small = lambda shape, max_tokens: shape.d_model <= 256  # noqa: E731
    derive(settings, texts(10**6, 10**5), figures, batches_per_epoch=lambda n: 1000, gpu=False,
           minutes=None, clock=None, fits=small)  # fmt: skip
    assert settings.derived["model"]["d_model"] == 256  # m, the largest that fits
    assert "model base left out: it does not fit in memory" in settings.lines

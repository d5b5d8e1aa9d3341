"""The recipe's rules on measured figures: each derived setting against its rule, what a config
gives always kept, a time budget divided by the timed step, and no derived plan that the start
checks would warn about, from 300 pairs to a million."""

import math

import pytest

from tfm.config import Config
from tfm.data.corpus_figures import SideFigures, TextFigures
from tfm.errors import ConfigError
from tfm.training.recipe import rules
from tfm.training.recipe.checks import check_settings, checkpoints_kept
from tfm.training.recipe.choices import Inputs, Settings
from tfm.training.recipe.derive import derive
from tfm.training.recipe.fingerprint import TokenFigures, measure_tokens
from tfm.training.recipe.ladder import LADDER, largest_for
from tfm.training.recipe.plan import with_values
from tfm.training.recipe.rules import default_epochs, min_epochs

LATIN = SideFigures(words=8, chars=40, types=0, distinct_chars=0, scripts=(("LATIN", 1.0),))


def texts(pairs: int, types: int, chars: int = 100) -> TextFigures:
    side = SideFigures(8, 40, types // 2, chars // 2, (("LATIN", 1.0),))
    return TextFigures(pairs=pairs, src=side, tgt=side, identical=0.0)


def tokens(pairs: int, per_sentence: float = 12.0) -> TokenFigures:
    n = int(pairs * per_sentence)
    return TokenFigures(pairs, per_sentence, per_sentence, 20, 20, n, n + 2 * pairs)


def vocab_size(figures: TextFigures) -> int:
    return rules.vocab_size(figures).value


def batch_tokens(figures: TokenFigures, *, gpu: bool) -> int:
    return rules.batch_tokens(figures.batch_tokens, gpu=gpu).value


def warmup(steps: int, layers: int) -> int:
    return rules.warmup(steps, layers).value


def peak_rate(d_model: int) -> float:
    return rules.peak_rate(d_model).value


def dropout(pairs: int, epochs: float) -> float:
    return rules.dropout(pairs, epochs).value


def inputs(pairs: int, *, minutes=None, clock=None, per_epoch=None, **more) -> Inputs:
    figures = tokens(pairs)
    batches = per_epoch or (lambda max_tokens: math.ceil(figures.batch_tokens / max_tokens))
    return Inputs(texts=texts(pairs, 10_000), tokens=figures, batches_per_epoch=batches,
                  gpu=more.pop("gpu", False), minutes=minutes, clock=clock, **more)  # fmt: skip


def planned(pairs: int, *, given=None, vocab: int = 4000, **figures) -> Settings:
    settings = Settings(given={"tokenizer": {"vocab_size": vocab}, **(given or {})})
    derive(settings, inputs(pairs, **figures))
    return settings


def test_vocabulary_is_a_quarter_of_the_word_types_within_bounds():
    assert vocab_size(texts(10_000, 16_997)) == 4000  # 16,997 / 4 = 4,249, rounded to 500
    assert vocab_size(texts(100, 800)) == 1000  # the floor
    assert vocab_size(texts(10**7, 10**6)) == 32000  # the ceiling
    assert vocab_size(texts(10_000, 8_000, chars=2_600)) == 5200  # twice the characters


def test_batch_gives_an_epoch_200_steps_on_a_cpu_and_100_on_a_gpu_within_the_bounds():
    assert batch_tokens(tokens(10_000), gpu=False) == 512  # 140,000 / 200 = 700
    assert batch_tokens(tokens(20_000), gpu=False) == 1024  # 1,400: 2,048 would give 137 steps
    assert batch_tokens(tokens(30_000), gpu=False) == 2048  # 2,100
    assert batch_tokens(tokens(60_000), gpu=False) == 4096  # 4,200
    assert batch_tokens(tokens(1_000), gpu=False) == 512  # 70: the floor
    assert batch_tokens(tokens(10**6), gpu=False) == 4096
    assert batch_tokens(tokens(30_000), gpu=True) == 4096  # 420,000 / 100 = 4,200
    assert batch_tokens(tokens(10_000), gpu=True) == 2048  # the floor
    assert batch_tokens(tokens(10**6), gpu=True) == 16384


def test_the_ladder_grows_with_the_target_tokens():
    # No rung between xs and m: 200,000 target tokens stay at xs.
    assert [LADDER[largest_for(n)].name for n in (10_000, 200_000, 380_000, 10**8)] == [
        "xs", "xs", "m", "base",
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
    assert peak_rate(256) == 1e-3 and peak_rate(512) == 7.1e-4 and peak_rate(128) == 1.4e-3
    assert (warmup(100, 4), warmup(1000, 4), warmup(10_000, 4), warmup(10**6, 6)) == (
        25, 250, 800, 4000,
    )  # fmt: skip
    assert t["validate_every"] == math.ceil(steps / 8)
    # The reasons count the same validations: of the eight, the last is the one at the end, and
    # patience is half of the seven before it, which can stop the run.
    every = t["validate_every"]
    assert steps % every == 0  # 40 epochs make a multiple of 8 steps: the 8th is at the end
    assert t["patience"] == 3 and settings.reasons["train.patience"] == (
        f"half of 7 validations before the end's, every {every:,} of {steps:,} steps"
    )
    assert settings.reasons["train.validate_every"] == (
        f"8 validations in {steps:,} steps, the last at the end"
    )
    # Whether or not the cadence divides the steps, 8 planned validations give the same count.
    for total in (8_000, 8_001, 8_007):
        validate = rules.validations(total, affordable=None).value
        assert rules.patience(total, validate).value == 3, total
    # 658 steps at 3 affordable: every 220 steps, the third validation is the end's.
    assert rules.validations(658, affordable=3).value == 220
    few = rules.patience(658, 220)
    assert few.value is None and few.rule == (
        "2 validations before the end's, every 220 of 658 steps: too few to stop early"
    )
    # A validation that alone takes more than its share of the budget is the end's only.
    for affordable in (0, 1):
        one = rules.validations(658, affordable=affordable)
        assert one.value == 658 and one.rule.startswith("1 validation, at the end of 658 steps")
    assert rules.validations(658, affordable=2).value == 329
    # Six planned validations leave five that can stop the run: too few, divisible or not.
    assert rules.patience(600, 100).value is None and rules.patience(599, 100).value is None
    assert rules.patience(700, 100).value == 3
    assert rules.patience(860, 500).rule == (  # the toy run's
        "1 validation before the end's, every 500 of 860 steps: too few to stop early"
    )


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
    settings = planned(10_000, per_epoch=lambda n: 60, bleu_ready=False)
    assert settings.derived["train"]["early_stopping_metric"] == "chrf"
    assert planned(10_000).derived["train"]["early_stopping_metric"] == "bleu"


def test_what_the_config_gives_is_kept_and_the_rest_follows_it():
    given = {"model": {"d_model": 512}, "train": {"lr": 3e-4, "warmup_steps": 100}}
    settings = planned(30_000, given=given)
    model, train = settings.derived["model"], settings.derived["train"]
    assert "d_model" not in model and "lr" not in train and "warmup_steps" not in train
    assert model["n_heads"] == 8 and model["d_ff"] == 2048  # from the given width
    # a hand recipe's warm-up keeps §5.3's decay, and the plan says so
    assert train["schedule"] == "inverse_sqrt" and train["decay_steps"] is None
    assert settings.reasons["train.schedule"].startswith("train.warmup_steps given: §5.3")
    assert settings.get("model", "d_model") == 512
    assert settings.reasons["model.n_heads"] == (
        "d_model 512 given: one head per 64 dimensions, at least 4"
    )


@pytest.mark.parametrize(("d_model", "heads"), [(128, 4), (96, 4), (512, 8), (1024, 16), (90, 3)])
def test_a_given_width_gets_a_head_per_64_dimensions_and_at_least_four(d_model, heads):
    assert rules.heads(d_model).value == heads
    settings = planned(30_000, given={"model": {"d_model": d_model}})
    assert settings.get("model", "n_heads") == heads


class FakeClock:
    """Seconds a step grow with the shape's weights; a validation takes 10 s."""

    def __init__(self):
        self.timed, self.beams = [], set()

    def step_seconds(self, shape, max_tokens):
        self.timed.append(shape.name)
        return shape.weights() / 2e6

    def validation_seconds(self, shape, beam_size):
        self.beams.add(beam_size)
        return 10.0


def test_a_time_budget_takes_the_largest_shape_that_trains_enough_epochs():
    fake = FakeClock()
    settings = planned(30_000, minutes=15, clock=fake, per_epoch=lambda max_tokens: 100)
    # m (0.5M tokens of data allow it) gives 2.75 s a step: 248 steps, 2.5 epochs < 12; xs
    # 0.46 s: 1,653 steps, 16.5 epochs.
    assert fake.timed == ["m", "xs"]
    assert settings.get("model", "n_encoder_layers") == 2  # xs
    seconds = LADDER[0].weights() / 2e6
    assert settings.steps == int(0.92 * (15 * 60 - 80) / seconds)
    assert settings.derived["train"]["max_steps"] == settings.steps
    assert settings.derived["train"]["max_epochs"] is None
    assert min_epochs(30_000) == 12


@pytest.mark.parametrize(("strategy", "beams"), [(None, {5}), ("greedy", {1}), ("sampling", {1})])
def test_a_validation_is_timed_with_the_decoding_it_will_use(strategy, beams):
    fake = FakeClock()
    given = {"decoding": {"strategy": strategy}} if strategy else {}
    planned(30_000, given=given, minutes=15, clock=fake, per_epoch=lambda max_tokens: 100)
    assert fake.beams == beams  # each shape's steps and the cadence, with one width


@pytest.mark.parametrize(
    ("minutes", "max_tokens", "chosen"), [(120, 2048, "xs"), (180, 2048, "m"), (120, 4096, "m")]
)
def test_a_deeper_shape_needs_two_million_batch_tokens_a_layer(minutes, max_tokens, chosen):
    """Under 120 minutes m trains 2,379 steps, its 12 epochs but under the 3,000 steps of 2,048
    tokens its three layers need, so xs is chosen; under 180 it trains 3,583 and is. Batches of
    4,096 tokens need only 1,500 steps for m's layers."""
    fake = FakeClock()
    given = {"train": {"max_tokens": max_tokens}}
    settings = planned(30_000, given=given, minutes=minutes, clock=fake,
                       per_epoch=lambda max_tokens: 100)  # fmt: skip
    assert fake.timed == (["m", "xs"] if chosen == "xs" else ["m"])
    (m,) = [shape for shape in LADDER if shape.name == "m"]
    m_steps = int(0.92 * (minutes * 60 - 80) / (m.weights() / 2e6))
    left_out = [line for line in settings.lines if line.startswith("model m left out")]
    assert (chosen == "xs") == bool(left_out)
    if left_out:
        assert left_out[0] == (f"model m left out: {m_steps:,} steps at 2.75 s, fewer than its "
                               "3,000 (12 epochs; 1,000 steps of 2048 tokens a layer)")  # fmt: skip
    else:
        assert settings.steps == m_steps
    assert settings.get("model", "d_model") == {"xs": 128, "m": 256}[chosen]


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
    assert "of the 1 validation(s) planned in 150 steps" in found[2]
    assert "0 come before the one at the end" in found[2]
    assert "than the 1 the run will keep" in found[3]
    # Patience counts the validations that can stop the run, as the recipe's rule does: of 8
    # every 100 of 800 steps, 7 come before the end's, and a patience of 7 needs 8 of them.
    for steps in (800, 790):
        for patience, warned in ((6, False), (7, True)):
            keys = {"warmup_steps": 10, "validate_every": 100, "patience": patience,
                    "average_last": 1, "keep_last": 3}  # fmt: skip
            config = Config.model_validate({"train": keys})
            found = [w for w in check_settings(config, steps) if w.startswith("train.patience")]
            assert bool(found) == warned, (steps, patience)
        assert f"of the 8 validation(s) planned in {steps} steps" in found[0]
        assert "7 come before the one at the end" in found[0]


def test_token_figures_count_framing_out_and_batches_at_the_longer_side():
    figures = measure_tokens([3, 5, 11], [4, 4, 12])  # src: ids + EOS; tgt: BOS + ids + EOS
    assert figures.src_mean == pytest.approx((2 + 4 + 10) / 3)
    assert figures.tgt_tokens == 2 + 2 + 10
    assert figures.batch_tokens == 4 + 5 + 12  # the longer framed side of each pair


def test_a_shape_that_does_not_fit_in_memory_is_never_chosen():
    small = lambda shape, max_tokens: shape.d_model <= 256  # noqa: E731
    # 1M pairs: enough tokens for the base model
    settings = planned(1_000_000, vocab=8000, per_epoch=lambda n: 1000, fits=small)
    assert settings.derived["model"]["d_model"] == 256  # m, the largest that fits
    assert "model base left out: it does not fit in memory" in settings.lines


def test_a_shape_given_in_part_still_walks_the_timed_ladder():
    fake = FakeClock()
    given = {"model": {"d_ff": 256}, "train": {"max_tokens": 4096}}
    settings = planned(30_000, given=given, minutes=60, clock=fake,
                       per_epoch=lambda max_tokens: 100)  # fmt: skip
    # m with its own d_ff of 1,024 (2.75 s a step) would train 1,176 steps in an hour, under the
    # 1,500 its layers need; with the given 256 (1.57 s) it trains 2,058, and is chosen.
    assert fake.timed == ["m"]
    assert settings.get("model", "d_model") == 256 and settings.get("model", "d_ff") == 256
    (line,) = [line for line in settings.lines if line.startswith("model m")]
    assert line.startswith(
        "model m with the given d_ff (d_model 256, 8 heads, 3+3 layers, d_ff 256):"
    )


def test_given_heads_that_do_not_divide_the_planned_width_are_one_error():
    """n_heads without d_model: heads that divide the rung's width keep it; others are refused
    in one line, as a config whose d_model and n_heads disagree is, never as a traceback."""
    eight = planned(30_000, given={"model": {"n_heads": 8}})
    assert (eight.get("model", "d_model"), eight.get("model", "n_heads")) == (256, 8)  # rung m
    with pytest.raises(ConfigError) as error:
        planned(30_000, given={"model": {"n_heads": 3}})
    assert str(error.value) == (
        "model.n_heads=3 does not divide the d_model 256 of the planned model m: give "
        "model.d_model too (a multiple of 3), or leave model.n_heads to the recipe"
    )


def test_a_shape_given_in_full_is_named_as_given_not_after_a_rung():
    xs = {"d_model": 128, "n_heads": 4, "n_encoder_layers": 2, "n_decoder_layers": 2, "d_ff": 512}
    settings = planned(30_000, given={"model": xs}, minutes=60, clock=FakeClock(),
                       per_epoch=lambda max_tokens: 100)  # fmt: skip
    (line,) = [line for line in settings.lines if line.startswith("model ")]
    assert line.startswith("model as given (d_model 128, 4 heads, 2+2 layers, d_ff 512):")


def test_accumulation_processes_and_both_way_epochs_count_in_the_steps():
    plain = planned(30_000, per_epoch=lambda max_tokens: 100)
    assert plain.steps == 40 * 100  # 40 epochs of 100 steps
    accumulated = planned(30_000, given={"train": {"accumulate": 2, "max_tokens": 4096}},
                          per_epoch=lambda max_tokens: 100)  # fmt: skip
    assert accumulated.steps_an_epoch == 50 and accumulated.steps == 40 * 50
    two = planned(30_000, given={"train": {"max_tokens": 4096}}, world_size=2,
                  per_epoch=lambda max_tokens: 101)  # fmt: skip
    assert two.steps_an_epoch == 50  # 50 steps of 2 batches; the last one is left out
    both = planned(30_000, given={"train": {"bidirectional_epochs": 10}},
                   per_epoch=lambda max_tokens: 100)  # fmt: skip
    assert both.steps == (40 + 10) * 100 and both.epochs == 40
    assert "train.bidirectional_epochs=10: those epochs count twice" in both.notes
    # the batch rule asks for 200 steps an epoch of 2 accumulated batches: half the batch
    assert rules.batch_tokens(1_680_000, gpu=False, batches_a_step=2).value == 4096
    assert rules.batch_tokens(1_680_000, gpu=False, batches_a_step=4).value == 2048


def test_a_compiled_run_is_told_its_steps_were_timed_uncompiled():
    settings = planned(30_000, minutes=15, clock=FakeClock(), compiled=True)
    assert "train.compile: the steps were timed uncompiled; the run re-times itself" in (
        settings.notes
    )


def test_every_recipe_key_has_one_rule_read_after_what_it_needs():
    from tfm.config import RECIPE_KEYS
    from tfm.training.recipe.derive import RULES, VOCABULARY

    keys = [key for rule in RULES for key in rule.keys] + list(VOCABULARY)
    assert sorted(keys) == sorted(f"{s}.{k}" for s, ks in RECIPE_KEYS.items() for k in ks)
    assert len(keys) == len(set(keys))
    seen = set(VOCABULARY)
    for rule in RULES:
        assert set(rule.needs) <= seen | set(rule.keys), (rule.keys, rule.needs)
        seen |= set(rule.keys)


@pytest.mark.parametrize("pairs", [300, 10_000, 1_000_000])
def test_every_derived_key_says_which_rule_chose_it(pairs):
    settings = planned(pairs, minutes=15, clock=FakeClock())
    derived = {f"{s}.{k}" for s, keys in settings.derived.items() for k in keys}
    assert derived and set(settings.reasons) == derived
    assert settings.reasons["train.warmup_steps"].startswith(f"max(8% of {settings.steps:,} steps")


class GpuClock:
    """An H100-like clock: a step's seconds from the shape's weights and the batch (6 FLOPs a
    weight and token at 40% of 989 TFLOP/s), a validation 20 s."""

    def step_seconds(self, shape, max_tokens):
        return 6 * shape.weights() * max_tokens / (0.4 * 989e12) + 0.01

    def validation_seconds(self, shape, beam_size):
        return 20.0


def test_a_million_pairs_for_twelve_hours_on_a_gpu_get_bounded_epochs_of_the_big_model():
    settings = planned(1_000_000, vocab=32_000, minutes=12 * 60, clock=GpuClock(), gpu=True,
                       per_epoch=lambda max_tokens: 25_000_000 // max_tokens)  # fmt: skip
    assert settings.get("model", "d_model") == 1024  # big: 25M target tokens support it
    assert settings.get("train", "max_tokens") == 16384
    assert settings.epochs == rules.most_epochs(1_000_000).value == 26
    assert settings.get("model", "dropout") == 0.1
    assert any(n.startswith("the budget is more than this corpus can use: 26 epochs")
               for n in settings.notes)  # fmt: skip
    cpu = planned(1_000_000, vocab=32_000, minutes=12 * 60, clock=GpuClock(),
                  per_epoch=lambda max_tokens: 25_000_000 // max_tokens)  # fmt: skip
    assert cpu.get("model", "d_model") <= 512  # big trains only on a GPU
    assert "big only on a GPU" in cpu.reasons["model.d_model"]


def test_epochs_past_what_the_corpus_is_worth_become_a_shorter_plan():
    assert [rules.most_epochs(n).value for n in (30_000, 10_000, 2_000, 1_000, 300)] == [
        150, 260, 581, 800, 800,
    ]  # fmt: skip
    fast = FakeClock()
    fast.step_seconds = lambda shape, max_tokens: 0.01  # type: ignore[method-assign]
    settings = planned(30_000, minutes=60, clock=fast, per_epoch=lambda max_tokens: 100)
    assert settings.steps == 150 * 100 and settings.ceiling == 15_000
    assert settings.reasons["train.max_steps"].startswith("150 epochs, the most 30,000 pairs")
    small = planned(1_000, minutes=60, clock=fast, per_epoch=lambda max_tokens: 40)
    assert small.steps == small.ceiling == 800 * 40  # 1/√pairs would give 822
    assert small.reasons["train.max_steps"].startswith(
        "800 epochs, the most 1,000 pairs are worth (150 at 30,000 scaled with 1/√pairs, in "
        "[10, 800]); the budget gives 323,840 steps, 8,096 epochs"
    )


class CpuClock:
    """A CPU-like clock: a step's seconds grow with the batch (xs: 0.25 s at 2,048 tokens); a
    validation takes 10 s."""

    def step_seconds(self, shape, max_tokens):
        return shape.weights() / 2e6 * max_tokens / 3_800

    def validation_seconds(self, shape, beam_size):
        return 10.0


def test_a_cpu_budget_of_too_few_epochs_halves_the_batch_but_not_below_1024():
    # 30,000 pairs: 420,000 batch tokens, 2,048-token batches at 200 steps an epoch (206 steps).
    # In 15 minutes xs trains 14.8 epochs (its 12 are met); in 8, 7.4 epochs: the batch halves to
    # 1,024 and xs, re-timed at half the seconds a step, trains twice the steps.
    long, short = (planned(30_000, minutes=m, clock=CpuClock()) for m in (15, 8))
    assert long.get("train", "max_tokens") == 2048 and long.epochs > 12
    assert short.get("train", "max_tokens") == 1024
    assert short.steps_an_epoch == math.ceil(420_000 / 1024)
    given = planned(30_000, minutes=8, clock=CpuClock(), given={"train": {"max_tokens": 2048}})
    assert short.steps == 2 * given.steps
    assert not any(line.startswith("batch halved") for line in given.lines)  # a given batch stays
    assert short.reasons["train.max_tokens"] == (
        "largest power of two giving 400 steps an epoch of 420,000 batch tokens, not halved "
        "below 1,024 (train.max_minutes=8 buys 7.4 epochs, fewer than the 12 that 30,000 pairs "
        "need), in [512, 4,096] on a CPU"
    )
    assert short.lines[:2] == [
        "model m left out: 253 steps at 1.48 s, fewer than its 3,000 (12 epochs; 1,000 steps of "
        "2048 tokens a layer)",
        "batch halved to 1,024 tokens: train.max_minutes=8 buys 7.4 epochs, fewer than the 12 "
        "that 30,000 pairs need",
    ]
    # 10,000 and 20,000 pairs plan 512 (the CPU floor) and 1,024: halving would pass 1,024
    for pairs, batch in ((10_000, 512), (20_000, 1024)):
        kept = planned(pairs, minutes=1, clock=CpuClock())
        assert kept.get("train", "max_tokens") == batch and kept.epochs < min_epochs(pairs)
        assert kept.reasons["train.max_tokens"].startswith("largest power of two giving 200 steps")
    # a GPU's plan keeps its 100 steps an epoch, and a plan of a given length its 200
    kept = [
        planned(30_000, minutes=8, clock=CpuClock(), gpu=True),
        planned(30_000, minutes=8, clock=CpuClock(), given={"train": {"max_epochs": 5}}),
    ]
    assert [k.get("train", "max_tokens") for k in kept] == [4096, 2048]

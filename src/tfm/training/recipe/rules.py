"""The recipe's rules as pure functions of measured figures, each with the words that say why.

Every function returns a `Choice`: the value and the rule written out with the figures it used
(`max(8% of 3,242 steps, 120 × 6 layers)`), which the plan stores beside the key and `tfm config
show` prints. `derive.py` applies them to a config in dependency order; the constants below are
where the rules were measured (docs/experiments.md has the runs).
"""

from __future__ import annotations

import math

from tfm.data.corpus_figures import TextFigures
from tfm.data.vocabulary import vocabulary_for
from tfm.training.recipe.choices import Choice

# Optimizer steps an epoch, at least, where the device's smallest batch allows. On a CPU a step's
# time grows with its tokens, so halving the batch doubles the updates a budget buys: on Multi30k
# in 15 minutes, 2,048-token batches (200 steps an epoch) beat 4,096 by 3.6 BLEU. A GPU's step of
# a small model is launch-bound (12-20 ms at 4,096 tokens), so halving it halves the tokens a
# second: it keeps 100.
CPU_STEPS_PER_EPOCH = 200
GPU_STEPS_PER_EPOCH = 100
# Where a CPU's budget buys even the smallest model fewer epochs than its corpus needs
# (`min_epochs`), updates are what it lacks: the batch gives an epoch twice the steps, but never
# halves below `FEW_EPOCHS_FLOOR` tokens. In 15 minutes (two seeds each): Multi30k (7-8 epochs)
# with 1,024-token batches beat 2,048 by 1.4 BLEU de->en and 0.9 en->de, against spreads of 0.2;
# the six Tatoeba pairs into English (69,414 pairs, 3 epochs) with 2,048 beat 4,096 by 4.9 and
# 7.9 BLEU. At 30 minutes (17 epochs) Multi30k's gain fell inside the spread, and on single
# Tatoeba pairs in 2.5 minutes (4-6 epochs) 256 against 512 was level or lost: a batch of 17
# sentences is too noisy (docs/experiments.md).
FEW_EPOCHS_FLOOR = 1024
VALIDATIONS = 8  # in a run, the one at its end included
VALIDATION_SHARE = 0.15  # of a time budget, at most, spent validating
# Checkpoints averaged at the end, one every `CHECKPOINT_SHARE` of the steps (the last AVERAGE
# span 15%). On Tatoeba's en-fr, en-tr and en-ja in 15 minutes (4, 4 and 2 runs of seeds 0 and 1),
# the last 5 averaged beat the last checkpoint in all ten runs: by 0.9, 0.3 and 0.5 test chrF on
# average, 0.2-1.3 a run. The last 7 or 10 moved the mean by -0.3 to +0.3, within the spread.
AVERAGE = 5
CHECKPOINT_SHARE = 0.03
# Warm-up steps a stack layer needs, at least: a post-norm stack at its peak rate too early can
# settle on one output for every source. On Multi30k de->en, the 3+3-layer m warmed up in 257
# steps gave every validation sentence the same translation at step 402 and was at 3.7 BLEU at
# step 804 (30.3 with 720 steps); the hand recipe warms the same model up in 800.
WARMUP_PER_LAYER = 120
# The most epochs a corpus of 30,000 pairs is worth, at the recipe's strongest dropout (0.3),
# scaled with 1/sqrt(pairs) as the other epoch rules are: 26 epochs at a million pairs, 260 at
# 10,000, and at most `MOST_EPOCHS` (below 1,055 pairs). Set from the smallest corpora, where long
# runs are cheap: on 1,000-pair samples of Tatoeba's en-fr and en-tr (seeds 0 and 1), xs at
# dropout 0.3 gained test chrF at every doubling from 100 epochs to 800, every 800 run above every
# 400 run (+0.7 and +0.4 on average; en-ja level from 200 on), so a 1,000-pair corpus is worth at
# least 800 epochs, and 150 at 30,000 is what 1/sqrt(pairs) makes of that. Larger corpora do not
# contradict it: on Multi30k (29k pairs) the 2.3M model gained from 100 epochs (40.0 BLEU) to 188
# (40.4), and an hour on Tatoeba's 12,000-pair corpora (118-134 epochs) beat 15 minutes on all
# three pairs. The cap is measured from above where it binds: on 500-pair samples of en-fr and en-tr
# (1/sqrt(pairs) alone gives 1,162), 1,600 epochs moved test chrF by +0.2 (less than the 1,600
# runs' own spread) and -0.1 against 800, and validation ended three of the four 800 runs at 700
# epochs. Past the bound where 1/sqrt(pairs) sets it, on a 2,000-pair sample of en-fr (581 epochs),
# 1,162 epochs moved the mean test chrF of two seeds by +0.1 over two at 581 (their spreads 0.4 and
# 0.5) and scored level or below at validation; on en-tr it gained 0.7 (both spreads under that),
# but validation had ended both 581-epoch runs at 450 epochs, so what bound them there was the
# stopping rule. Validation ends a run that stops gaining before the bound does
# (docs/experiments.md).
MOST_EPOCHS_AT_30K = 150
MOST_EPOCHS = 800
BEAM = 5  # §6.1 used 4; beam 5 gained 0.3-0.8 BLEU over greedy on Multi30k, 10 no more


def vocab_size(figures: TextFigures) -> Choice:
    """The data's rule (`tfm.data.vocabulary`): a quarter of the word types, at least twice the
    characters, in [1000, 32000]."""
    return Choice(*vocabulary_for(figures))


def batch_tokens(
    epoch_tokens: int,
    *,
    gpu: bool,
    batches_a_step: int = 1,
    few_epochs: str | None = None,
    whose: str = "",
) -> Choice:
    """The largest power of two that gives an epoch of `epoch_tokens` batch tokens at least
    `CPU_STEPS_PER_EPOCH` (on a GPU `GPU_STEPS_PER_EPOCH`) optimizer steps of `batches_a_step`
    batches (train.accumulate × processes), within the device's bounds ([512, 4096] on a CPU,
    [2048, 16384] on a GPU). A small corpus learns more from more, smaller updates (Sennrich &
    Zhang, 2019): in 15 minutes on five Tatoeba pairs (two or three seeds each), 512-token
    batches against 1,024 gained 1.1 chrF on en-it and 0.5 on en-tr, were level on en-fr and
    lost 0.3 on en-uk and en-ja (docs/experiments.md). `few_epochs`: why a CPU's budget buys
    too few epochs (`length.py` says when); the steps an epoch then double, the batch not halved
    below `FEW_EPOCHS_FLOOR`. `whose`: whose epoch it is, where not the whole corpus's (the main
    pair's beside related pairs)."""
    low, high = (2048, 16384) if gpu else (512, 4096)
    steps = GPU_STEPS_PER_EPOCH if gpu else CPU_STEPS_PER_EPOCH
    size = _power_of_two(epoch_tokens / steps / batches_a_step, low, high)
    if few_epochs is not None:
        steps *= 2
        halved = _power_of_two(epoch_tokens / steps / batches_a_step, low, high)
        size = max(halved, min(size, FEW_EPOCHS_FLOOR))
    per_step = f" of {batches_a_step} batches" if batches_a_step > 1 else ""
    floor = f", not halved below {FEW_EPOCHS_FLOOR:,} ({few_epochs})" if few_epochs else ""
    return Choice(
        size,
        f"largest power of two giving {steps} steps{per_step} an epoch of {whose}"
        f"{epoch_tokens:,} batch tokens{floor}, in [{low:,}, {high:,}] on a "
        f"{'GPU' if gpu else 'CPU'}",
    )


def _power_of_two(wanted: float, low: int, high: int) -> int:
    """The largest power of two at most `wanted`, within [low, high]."""
    return int(min(max(2 ** math.floor(math.log2(max(wanted, 1))), low), high))


def min_epochs(pairs: int) -> int:
    """The fewest epochs a model should train on a corpus of `pairs`: 12 at 30,000 pairs, more
    for fewer pairs (at most 20), fewer for more (at least 2)."""
    return int(min(max(round(12 * math.sqrt(30_000 / max(pairs, 1))), 2), 20))


def default_epochs(pairs: int) -> int:
    """Epochs without any budget: 40 at 30,000 pairs, more for fewer (at most 100), fewer for
    more (at least 5)."""
    return int(min(max(round(40 * math.sqrt(30_000 / max(pairs, 1))), 5), 100))


def most_epochs(pairs: int) -> Choice:
    """The most epochs a corpus of `pairs` is worth (`MOST_EPOCHS_AT_30K`, scaled with
    1/sqrt(pairs)), in [10, `MOST_EPOCHS`]: beyond them, a longer budget gives nothing but time."""
    fewest, scaled = 10, round(MOST_EPOCHS_AT_30K * math.sqrt(30_000 / max(pairs, 1)))
    return Choice(
        min(max(scaled, fewest), MOST_EPOCHS),
        f"the most {pairs:,} pairs are worth ({MOST_EPOCHS_AT_30K} at 30,000 scaled with "
        f"1/√pairs, in [{fewest}, {MOST_EPOCHS}])",
    )


def dropout(pairs: int, epochs: float) -> Choice:
    """Residual dropout from the corpus's size and the epochs it trains: 0.1 for corpora of
    100,000 pairs or more, and for smaller ones trained for at most 25 epochs; 0.2 up to 50
    epochs; 0.3 beyond (the 7.6M model at 0.1 peaked at epoch 29 on Multi30k en→de)."""
    if pairs >= 100_000:
        return Choice(0.1, f"{pairs:,} pairs: 0.1 for 100,000 or more")
    value = 0.1 if epochs <= 25 else 0.2 if epochs <= 50 else 0.3
    return Choice(value, f"{epochs:.1f} epochs of {pairs:,} pairs: 0.1 to 25, 0.2 to 50, else 0.3")


def peak_rate(d_model: int) -> Choice:
    """1e-3 at d_model 256, scaled with d_model^-0.5 as §5.3's rate is: 1.4e-3 at 128, 7.1e-4 at
    512. On Tatoeba's en-fr, en-tr and en-ja (three seeds each) 1.4e-3 at 128 was 3 chrF above
    the former 1/d_model rule's 2e-3 on Japanese and level on French and Turkish; with
    512-token batches, 1e-3 at 128 was within the seed spread of 1.4e-3 on all three
    (docs/experiments.md)."""
    rate = float(f"{1e-3 * math.sqrt(256 / d_model):.2g}")
    return Choice(rate, f"1e-3 · (256 / d_model {d_model})^0.5")


def warmup(steps: int, layers: int) -> Choice:
    """8% of the steps, at least `WARMUP_PER_LAYER` a layer of the two stacks but never more than
    a quarter of the steps, at most 4000."""
    wanted = max(round(0.08 * steps), WARMUP_PER_LAYER * layers)
    value = max(min(wanted, steps // 4, 4000), 1)
    return Choice(
        value,
        f"max(8% of {steps:,} steps, {WARMUP_PER_LAYER} × {layers} layers), at most a quarter "
        "of the steps and 4,000",
    )


def heads(d_model: int) -> Choice:
    """Heads for a given width: one per 64 dimensions, at least 4 (the ladder's fewest), the
    largest such count that divides `d_model`."""
    wanted = max(d_model // 64, 4)
    value = next(h for h in range(wanted, 0, -1) if d_model % h == 0)
    return Choice(value, f"d_model {d_model} given: one head per 64 dimensions, at least 4")


def validations(steps: int, *, affordable: int | None) -> Choice:
    """Validate `VALIDATIONS` times in the run, fewer when each validation would take more than
    its share of a time budget (`affordable`); at least once, at the end. A validation in the
    middle that costs more than the share pins the run's end to it: the clock, re-timing a short
    budget, ends the run there rather than pay for a second validation later, and up to a
    quarter of the budget went unused."""
    count = VALIDATIONS if affordable is None else max(min(VALIDATIONS, affordable), 1)
    every = max(math.ceil(steps / count), 1)
    share = f"{VALIDATION_SHARE:.0%}"
    if count == 1:
        return Choice(every, f"1 validation, at the end of {steps:,} steps (a second would take "
                             f"over {share} of the budget)")  # fmt: skip
    limit = (
        "" if count == VALIDATIONS else f" ({count}: validating takes over {share} of the budget)"
    )
    return Choice(every, f"{count} validations in {steps:,} steps, the last at the end{limit}")


def validations_that_can_stop(steps: int, every: int) -> int:
    """Of the validations every `every` of `steps` (the last at the end, whether or not `every`
    divides `steps`), those that can stop the run: all but the one at the end."""
    return math.ceil(steps / every) - 1


def patience(steps: int, every: int) -> Choice:
    """Stop after half the validations that can stop the run without a better score (none under
    6): those every `every` of `steps` before the one at the end, which has nothing left to stop,
    so that the count is the same whether or not `every` divides `steps`. Under the cosine decay
    the run then cools down before it stops (training/clock.py)."""
    count = validations_that_can_stop(steps, every)
    noun = "validation" if count == 1 else "validations"
    planned = f"{count} {noun} before the end's, every {every:,} of {steps:,} steps"
    if count < 6:
        return Choice(None, f"{planned}: too few to stop early")
    return Choice(count // 2, f"half of {planned}")


def checkpoint_every(steps: int) -> Choice:
    """A checkpoint every `CHECKPOINT_SHARE` of the steps, so the last `AVERAGE` span
    `AVERAGE` times that share of the run."""
    value = max(round(CHECKPOINT_SHARE * steps), 1)
    span = f"the last {AVERAGE} span {AVERAGE * CHECKPOINT_SHARE:.0%} of the run"
    return Choice(value, f"{CHECKPOINT_SHARE:.0%} of {steps:,} steps: {span}")


def average_last(steps: int, every: int) -> Choice:
    """`AVERAGE` checkpoints where the run has at least four times that many, else none."""
    if steps >= AVERAGE * every * 4:
        return Choice(
            AVERAGE, f"{steps // every} checkpoints in {steps:,} steps: the last {AVERAGE}"
        )
    return Choice(1, f"{steps // every} checkpoints: too few to average")


def strategy() -> Choice:
    """Beam search, which gained 0.3-0.8 BLEU over greedy on Multi30k."""
    return Choice("beam", "beam search (§6.1): +0.3–0.8 BLEU over greedy on Multi30k")


def metric(*, bleu_ready: bool) -> Choice:
    """BLEU picks the best checkpoint, or chrF where sacreBLEU cannot split the target
    language's words (Japanese without MeCab, Thai: BLEU on characters says little)."""
    if bleu_ready:
        return Choice("bleu", "BLEU")
    return Choice("chrf", "chrF: sacreBLEU cannot split the target language's words")


def keep_last(average: int) -> Choice:
    """Twice the checkpoints averaged, at least 3."""
    return Choice(max(average * 2, 3), f"twice the {average} averaged, ≥ 3")

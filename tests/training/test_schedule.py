"""The learning-rate schedule: a linear warm-up, then §5.3's inverse square root or the recipe's
cosine decay to `FLOOR` of the peak, flat after it; a decay re-anchored mid-run stays
continuous and ends at its new end."""

import math

import pytest

from tfm.training.clock import moved_to
from tfm.training.schedule import Decay, learning_rate


def test_warm_up_is_linear_and_inverse_square_root_halves_the_rate_at_four_times_it():
    rates = [learning_rate(s, peak=1e-3, warmup_steps=100) for s in (1, 50, 100, 400)]
    assert rates == pytest.approx([1e-5, 5e-4, 1e-3, 5e-4])


def cosine(step: int, decay: Decay) -> float:
    return learning_rate(step, peak=2e-3, warmup_steps=100, schedule="cosine", decay=decay)


def test_the_cosine_decay_ends_at_three_tenths_of_the_peak_and_stays_there():
    decay = Decay(start=100, end=1100)  # 1,000 steps after a warm-up of 100
    assert cosine(100, decay) == pytest.approx(2e-3)
    assert cosine(600, decay) == pytest.approx(2e-3 * 0.65)  # halfway: (1 + 0.3) / 2
    expected = 2e-3 * (0.3 + 0.7 * (1 + math.cos(math.pi / 4)) / 2)
    assert cosine(350, decay) == pytest.approx(expected)
    assert cosine(1100, decay) == cosine(5000, decay) == pytest.approx(2e-3 * 0.3)


def test_a_decay_moved_mid_run_is_continuous_and_ends_at_its_new_end():
    first = Decay(start=100, end=1100)
    plan = moved_to(2000, step=400, warmup=100, decay=first, cadence=None)
    moved = Decay(start=plan.decay_from, end=plan.end, done=plan.decay_done)
    assert plan.decay_done == pytest.approx(0.3)  # 300 of the first 1,000 steps
    assert cosine(400, moved) == cosine(400, first)  # no jump where it moves
    assert cosine(401, moved) > cosine(401, first)  # slower: the end is further away
    assert cosine(1999, moved) > 2e-3 * 0.3 == pytest.approx(cosine(2000, moved))
    shorter = moved_to(500, step=400, warmup=100, decay=first, cadence=None)
    assert cosine(500, Decay(shorter.decay_from, shorter.end, shorter.decay_done)) == (
        pytest.approx(2e-3 * 0.3)
    )
    during_warmup = moved_to(3000, step=50, warmup=100, decay=first, cadence=None)
    assert (during_warmup.decay_from, during_warmup.decay_done) == (100, 0.0)


def test_the_cosine_decay_needs_its_length():
    with pytest.raises(ValueError, match="train.decay_steps"):
        learning_rate(200, peak=1e-3, warmup_steps=100, schedule="cosine")

"""The learning-rate schedule: a linear warm-up, then §5.3's inverse square root or the recipe's
cosine decay to `FLOOR` of the peak, flat after it."""

import math

import pytest

from tfm.training.schedule import learning_rate


def test_warm_up_is_linear_and_inverse_square_root_halves_the_rate_at_four_times_it():
    rates = [learning_rate(s, peak=1e-3, warmup_steps=100) for s in (1, 50, 100, 400)]
    assert rates == pytest.approx([1e-5, 5e-4, 1e-3, 5e-4])


def test_the_cosine_decay_ends_at_three_tenths_of_the_peak_and_stays_there():
    def rate(step: int) -> float:
        return learning_rate(step, peak=2e-3, warmup_steps=100, schedule="cosine", decay_steps=1000)

    assert rate(100) == pytest.approx(2e-3)
    assert rate(600) == pytest.approx(2e-3 * 0.65)  # halfway: (1 + 0.3) / 2
    assert rate(350) == pytest.approx(2e-3 * (0.3 + 0.7 * (1 + math.cos(math.pi / 4)) / 2))
    assert rate(1100) == rate(5000) == pytest.approx(2e-3 * 0.3)


def test_the_cosine_decay_needs_its_length():
    with pytest.raises(ValueError, match="train.decay_steps"):
        learning_rate(200, peak=1e-3, warmup_steps=100, schedule="cosine")

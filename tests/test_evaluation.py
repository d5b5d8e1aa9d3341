"""`score_translations`: the brevity penalty's lengths against hand-counted sacreBLEU tokens."""

import math

import pytest

from tfm.evaluation import score_translations

REFS = [
    "Zwei junge Männer stehen vor einem roten Haus.",
    "Ein Hund rennt durch den hohen Schnee.",
]


def test_lengths_count_13a_tokens_and_give_the_brevity_penalty():
    # "Ein Hund." is 3 tokens (13a splits off the full stop), "zwei Katzen" 2; the references
    # "Ein Hund läuft." and "Zwei Katzen schlafen" are 4 + 3.
    scores = score_translations(
        ["Ein Hund.", "zwei Katzen"], ["Ein Hund läuft.", "Zwei Katzen schlafen"]
    )
    assert (scores["hyp_len"], scores["ref_len"]) == (5, 7)
    assert scores["length_ratio"] == round(5 / 7, 4)
    assert scores["brevity_penalty"] == pytest.approx(math.exp(1 - 7 / 5), abs=1e-4)


def test_short_but_exact_output_scores_the_brevity_penalty_alone():
    # Each hypothesis is its reference without the last word and full stop: every n-gram is
    # right, so BLEU is 100 times the brevity penalty (7 + 6 tokens against 9 + 8).
    hyps = [" ".join(r.split()[:-1]) for r in REFS]
    scores = score_translations(hyps, REFS)
    assert (scores["hyp_len"], scores["ref_len"]) == (13, 17)
    assert scores["brevity_penalty"] == pytest.approx(math.exp(1 - 17 / 13), abs=1e-4)
    assert scores["bleu"] == pytest.approx(100 * math.exp(1 - 17 / 13), abs=0.01)


def test_long_output_has_no_penalty_and_a_ratio_above_one():
    hyps = [r + " " + r for r in REFS]
    scores = score_translations(hyps, REFS)
    assert scores["length_ratio"] == 2.0 and scores["brevity_penalty"] == 1.0


def test_empty_references_have_no_ratio():
    scores = score_translations(["", ""], ["", ""])
    assert (scores["hyp_len"], scores["ref_len"], scores["length_ratio"]) == (0, 0, None)

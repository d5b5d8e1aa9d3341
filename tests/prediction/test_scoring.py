"""`score_translations`: the brevity penalty's lengths against hand-counted sacreBLEU tokens, and
scores summed chunk by chunk against sacreBLEU's own corpus scores."""

import math
import random

import pytest
import sacrebleu

from tfm.data.toy.generator import generate
from tfm.prediction import scoring as evaluation
from tfm.prediction.scoring import score_translations

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


def test_chunked_statistics_give_sacrebleus_corpus_scores(monkeypatch):
    rng = random.Random(5)
    refs = [de for _, de in generate(n_train=1203, n_validation=0, n_test=0, seed=9)["train"]]
    hyps = []
    for ref in refs:  # each reference with a word or two dropped, doubled or lowercased
        words = ref.split()
        i = rng.randrange(len(words))
        words = rng.choice([words[:i] + words[i + 1 :], words + words[i : i + 1], [ref.lower()]])
        hyps.append(" ".join(words))
    monkeypatch.setattr(evaluation, "SCORE_CHUNK", 100)  # 13 chunks, the last of 3 sentences
    scores = score_translations(hyps, refs)
    cased = sacrebleu.corpus_bleu(hyps, [refs])
    assert scores["bleu"] == round(cased.score, 2) and 20 < scores["bleu"] < 95
    assert (scores["hyp_len"], scores["ref_len"]) == (cased.sys_len, cased.ref_len)
    assert scores["brevity_penalty"] == round(cased.bp, 4)
    lower = sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score
    assert scores["bleu_lowercase"] == round(lower, 2) > scores["bleu"]
    assert scores["chrf"] == round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2)


def test_nothing_to_score_is_an_error():
    with pytest.raises(ValueError, match="no translations to score"):
        score_translations([], [])

"""Reranking with a reverse-direction model: the channel score against the reverse model's loss,
the combined score, the new order, and blank lines."""

import pytest
from reverse_model import DE, EN, reverse_reranker

from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import BOS_ID, EOS_ID
from tfm.prediction.likelihood import teacher_forced_loss
from tfm.prediction.reranking import Reranker


@pytest.fixture(scope="module")
def reverse():
    return reverse_reranker()


def test_channel_score_is_minus_the_reverse_models_loss_per_source_token(reverse):
    scores = reverse.channel_scores(EN, DE)  # log p(english | german) / |english|
    for en, de, score in zip(EN, DE, scores, strict=True):
        src = [reverse.tokenizer.encode_src([de])[0] + [EOS_ID]]
        tgt = [[BOS_ID, *reverse.tokenizer.encode_tgt([en])[0], EOS_ID]]
        one = EncodedSplit("one", [de], [en], src, tgt, report=None)
        assert score == pytest.approx(-teacher_forced_loss(reverse.model, one, reverse.settings))


def test_rerank_sorts_by_forward_plus_weighted_channel_score(reverse):
    source = EN[0]
    candidates = DE  # three German hypotheses for one English source, beam scores below
    forward = [-0.1, -0.2, -0.3]
    channel = reverse.channel_scores([source] * 3, candidates)
    combined = [f + 0.5 * c for f, c in zip(forward, channel, strict=True)]
    beam = list(zip(candidates, forward, strict=True))
    [ranked] = reverse.rerank([source], [beam])
    expected = sorted(zip(candidates, combined, strict=True), key=lambda pair: -pair[1])
    assert [text for text, _ in ranked] == [text for text, _ in expected]
    assert [score for _, score in ranked] == pytest.approx([score for _, score in expected])
    # A heavy weight orders by the channel score alone; weight 0 keeps the beam's order.
    heavy = Reranker(reverse.model, reverse.tokenizer, reverse.settings, weight=1e6)
    by_channel = sorted(candidates, key=lambda text: -channel[candidates.index(text)])
    assert [text for text, _ in heavy.rerank([source], [beam])[0]] == by_channel
    zero = Reranker(reverse.model, reverse.tokenizer, reverse.settings, weight=0.0)
    assert zero.rerank([source], [beam[::-1]])[0] == beam  # worst first: sorting restores it


def test_a_blank_source_keeps_its_hypotheses_and_others_are_still_reranked(reverse):
    blank = [("", 0.0), ("", 0.0)]
    nbest = [[(DE[1], -0.5), (DE[0], -0.4)], blank, [(DE[2], -0.1), (DE[0], -0.2)]]
    ranked = reverse.rerank([EN[0], "  ", EN[2]], nbest)
    assert ranked[1] == blank
    alone = reverse.rerank([EN[0], EN[2]], [nbest[0], nbest[2]])
    assert [ranked[0], ranked[2]] == alone


def test_mismatched_lengths_are_refused(reverse):
    with pytest.raises(ValueError, match="2 sources but 1 n-best lists"):
        reverse.rerank(EN[:2], [[(DE[0], 0.0)]])
    with pytest.raises(ValueError, match="1 sources but 2 hypotheses"):
        reverse.channel_scores(EN[:1], DE[:2])


def test_channel_scores_once_then_combined_at_each_weight_equal_reranking_at_it(reverse):
    nbest = [[(DE[1], -0.5), (DE[0], -0.4)], [("", 0.0)], [(DE[2], -0.1), (DE[0], -0.2)]]
    sources = [EN[0], " ", EN[2]]
    channel = reverse.channel_of(sources, nbest)
    assert [len(scores) for scores in channel] == [2, 0, 2]
    assert channel[2] == pytest.approx(reverse.channel_scores([EN[2]] * 2, [DE[2], DE[0]]))
    for weight in (0.0, 0.5, 3.0, 1e6):
        at = Reranker(reverse.model, reverse.tokenizer, reverse.settings, weight=weight)
        assert at.combine(nbest, channel) == at.rerank(sources, nbest)
    assert reverse.combine(nbest, channel)[1] == nbest[1]

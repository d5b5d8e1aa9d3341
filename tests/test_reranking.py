"""Reranking with a reverse-direction model: its log-probabilities against a plain forward pass,
the combined score, the new order, and blank lines."""

import pytest
import torch

from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import BOS_ID, EOS_ID, train_tokenizer
from tfm.evaluation import DecodeSettings, sequence_log_probs, teacher_forced_loss
from tfm.reranking import Reranker
from tfm.transformer import ModelArgs, build_model

EN = ["the dog sees the cat", "a man rides a red bike", "two girls play in the snow"]
DE = ["der Hund sieht die Katze", "ein Mann fährt ein rotes Rad", "zwei Mädchen spielen im Schnee"]


@pytest.fixture(scope="module")
def reverse():
    """A random German→English model (untrained: its scores still differ from pair to pair)
    with a joint tokenizer, as a `Reranker` of weight 0.5."""
    torch.manual_seed(0)
    tokenizer = train_tokenizer(DE, EN, vocab_size=120, min_frequency=1)
    V = tokenizer.src_vocab_size
    model = build_model(ModelArgs(src_vocab_size=V, tgt_vocab_size=V, d_model=16, n_heads=2,
                                  n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0,
                                  share_embeddings=True))  # fmt: skip
    return Reranker(model.eval(), tokenizer, DecodeSettings(max_tokens=40), weight=0.5)


def test_sequence_log_probs_are_each_pairs_log_likelihood_alone(reverse):
    model, settings = reverse.model, reverse.settings
    src = [ids + [EOS_ID] for ids in reverse.tokenizer.encode_src(DE)]
    tgt = [[BOS_ID, *ids, EOS_ID] for ids in reverse.tokenizer.encode_tgt(EN)]
    batched = sequence_log_probs(model, src, tgt, settings)  # padded, in batches of <= 40 tokens
    for s, t, found in zip(src, tgt, batched, strict=True):
        with torch.no_grad():
            logits = model(torch.tensor([s]), torch.tensor([t[:-1]]))  # (1, T, V), no padding
        log_probs = logits[0].log_softmax(dim=-1)  # (T, V)
        expected = sum(float(log_probs[i, token]) for i, token in enumerate(t[1:]))
        assert found == pytest.approx(expected, abs=1e-4)
    assert len(set(batched)) == len(batched)  # the test would notice a mix-up of pairs


def test_pairs_longer_than_the_positional_table_are_scored_as_cut_to_fit_it():
    torch.manual_seed(1)
    model = build_model(ModelArgs(src_vocab_size=20, tgt_vocab_size=20, d_model=8, n_heads=2,
                                  n_encoder_layers=1, n_decoder_layers=1, d_ff=16, dropout=0.0,
                                  max_len=6)).eval()  # fmt: skip
    settings = DecodeSettings(max_tokens=40)
    long_src, long_tgt = [5, 6, 7, 8, 9, 10, 11, EOS_ID], [BOS_ID, *range(5, 14), EOS_ID]
    cut_src, cut_tgt = [5, 6, 7, 8, 9, EOS_ID], [BOS_ID, 5, 6, 7, 8, 9, EOS_ID]  # 6 positions
    short = ([5, EOS_ID], [BOS_ID, 7, 8, EOS_ID])
    scored = sequence_log_probs(model, [long_src, short[0]], [long_tgt, short[1]], settings)
    alone = sequence_log_probs(model, [cut_src, short[0]], [cut_tgt, short[1]], settings)
    assert scored == pytest.approx(alone, abs=1e-5)
    # The loss counts the tokens scored: 6 for the cut pair, 3 for the short one.
    long = EncodedSplit("long", ["-"] * 2, ["-"] * 2, [long_src, short[0]], [long_tgt, short[1]],
                        report=None)  # fmt: skip
    assert teacher_forced_loss(model, long, settings) == pytest.approx(-sum(alone) / 9, abs=1e-5)


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

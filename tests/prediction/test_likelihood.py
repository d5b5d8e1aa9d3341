"""Teacher-forced scoring: each pair's log-likelihood in a padded batch against a forward pass of
the pair alone, and over-long pairs scored as cut to fit the positional table."""

import pytest
import torch
from reverse_model import DE, EN, reverse_reranker
from tiny_models import decode_settings

from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import BOS_ID, EOS_ID
from tfm.prediction.likelihood import sequence_log_probs, teacher_forced_loss
from tfm.transformer import ModelArgs, build_model


@pytest.fixture(scope="module")
def reverse():
    return reverse_reranker()


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
    settings = decode_settings({"max_tokens": 40})
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

"""An ensemble decodes with the mean of its members' next-token probabilities: greedy and beam
search over it against a brute-force reference that re-runs every member over the whole prefix."""

import math

import pytest
import torch
from tiny_models import copy_batch, lively_model, padded_batch, search_options, train_copy_model

from tfm.prediction.ensemble import Ensemble, mean_probability_logits
from tfm.transformer import (
    ModelArgs,
    beam_search,
    build_model,
    gnmt_length_penalty,
    greedy_decode,
)
from tfm.transformer.decoding import output_limits

V = 16
OPTIONS = search_options(1.0, 5)


@pytest.fixture(scope="module")
def members(copy_model):
    """A model trained to copy its source and a weaker one (40 steps instead of 100): they
    disagree on some sentences, and end them with EOS at different steps."""
    return [copy_model, train_copy_model(steps=40)]


def sources() -> torch.Tensor:
    return copy_batch(8, torch.Generator().manual_seed(1))[0]


@torch.no_grad()
def mean_probabilities(models, src_row: torch.Tensor, prefix: list[int]) -> torch.Tensor:
    """(T, V): at each position of `prefix`, the mean over `models` of the next-token
    probabilities, each model re-run over the whole prefix (no cache)."""
    ids = torch.tensor([prefix])
    return torch.stack([m(src_row[None], ids)[0].softmax(dim=-1) for m in models]).mean(dim=0)


def test_mean_probability_logits_is_the_log_of_the_mean_probability():
    logits = [torch.randn(3, 5, V, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    expected = torch.stack([x.softmax(dim=-1) for x in logits]).mean(dim=0).log()
    combined = mean_probability_logits(logits)
    torch.testing.assert_close(combined, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(combined.exp().sum(dim=-1), torch.ones(3, 5))  # normalised


def test_greedy_over_an_ensemble_follows_the_mean_probability(members):
    src, eos_id = sources(), 2
    limits = output_limits(members[0], src, OPTIONS["limit"]).tolist()
    found = greedy_decode(Ensemble(members), src, **OPTIONS).tokens
    for i, tokens in enumerate(found):
        prefix = [1]
        while len(prefix) - 1 < limits[i]:
            prefix.append(int(mean_probabilities(members, src[i], prefix)[-1].argmax()))
            if prefix[-1] == eos_id:
                break
        expected = prefix[1:-1] if prefix[-1] == eos_id else prefix[1:]
        assert tokens == expected, i
    # The ensemble decodes differently from either member alone (else this test shows little).
    for model in members:
        assert greedy_decode(model, src, **OPTIONS).tokens != found


def test_beam_scores_are_the_ensembles_length_normalised_log_probabilities(members):
    src = sources()
    limits = output_limits(members[0], src, OPTIONS["limit"]).tolist()
    results = beam_search(Ensemble(members), src, beam_size=4, n_best=3, length_penalty=0.6,
                          **OPTIONS)  # fmt: skip
    for i, hypotheses in enumerate(results):
        assert [h.score for h in hypotheses] == sorted((h.score for h in hypotheses), reverse=True)
        for tokens, score in hypotheses:
            generated = tokens + [2] if len(tokens) < limits[i] else tokens
            probs = mean_probabilities(members, src[i], [1, *generated[:-1]])  # (T, V)
            total = sum(math.log(probs[t, token]) for t, token in enumerate(generated))
            expected = total / gnmt_length_penalty(len(generated), 0.6)
            assert score == pytest.approx(expected, abs=1e-4)


def test_an_ensemble_of_one_model_or_of_copies_decodes_as_the_model(members):
    model, src = members[1], sources()
    greedy = greedy_decode(model, src, **OPTIONS).tokens
    beams = beam_search(model, src, beam_size=4, n_best=2, length_penalty=0.6, **OPTIONS)
    for ensemble in (Ensemble([model]), Ensemble([model, model, model])):
        assert greedy_decode(ensemble, src, **OPTIONS).tokens == greedy
        found = beam_search(ensemble, src, beam_size=4, n_best=2, length_penalty=0.6,
                            **OPTIONS)  # fmt: skip
        for ours, theirs in zip(found, beams, strict=True):
            assert [h.tokens for h in ours] == [h.tokens for h in theirs]
            assert [h.score for h in ours] == pytest.approx([h.score for h in theirs], abs=1e-5)


def test_teacher_forcing_gives_the_ensembles_log_probabilities_at_kept_positions(members):
    src, tgt = copy_batch(8, torch.Generator().manual_seed(2))
    keep = tgt != 0
    full = Ensemble(members)(src, tgt)  # (B, T, V)
    expected = torch.stack([m(src, tgt).softmax(dim=-1) for m in members]).mean(dim=0).log()
    torch.testing.assert_close(full, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(Ensemble(members)(src, tgt, keep=keep), full[keep])


def test_members_must_share_the_target_vocabulary_and_padding():
    small = build_model(ModelArgs(src_vocab_size=V, tgt_vocab_size=12, d_model=32, n_heads=4))
    with pytest.raises(ValueError, match=r"target vocabulary size \[12, 16\]"):
        Ensemble([lively_model(), small])
    with pytest.raises(ValueError, match="at least one model"):
        Ensemble([])


def test_an_ensemble_refuses_to_return_attention_weights(members):
    src = padded_batch([3], vocab_size=V)
    with pytest.raises(ValueError, match="does not return attention weights"):
        greedy_decode(Ensemble(members), src, **OPTIONS, return_attention=True)

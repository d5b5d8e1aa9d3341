import pytest
import torch
from tiny_models import copy_batch, lively_model, padded_batch

from tfm.transformer import Transformer, beam_search, gnmt_length_penalty, greedy_decode
from tfm.transformer.decoding import output_limits

V = 16
SOURCE_LENGTHS = [9, 3, 6, 1, 7, 4]
OPTIONS = dict(max_len_a=1.0, max_len_b=5)


@torch.no_grad()
def score(model: Transformer, src: torch.Tensor, tokens: list[int], limit: int, eos_id: int,
          alpha: float) -> float:  # fmt: skip
    """The search's score recomputed by teacher forcing: summed log-probabilities of the tokens
    (and of the EOS, which a hypothesis shorter than its limit ended with), over lp(length)."""
    generated = tokens + [eos_id] if len(tokens) < limit else tokens
    ids = torch.tensor([[1, *generated]])
    log_probs = model(src[None], ids[:, :-1]).log_softmax(dim=-1)[0]  # (T, V)
    total = log_probs[torch.arange(len(generated)), ids[0, 1:]].sum()
    return float(total) / gnmt_length_penalty(len(generated), alpha)


def test_beam_of_one_is_greedy(copy_model):
    src, _ = copy_batch(8, torch.Generator().manual_seed(1))
    greedy = greedy_decode(copy_model, src, **OPTIONS).tokens
    beams = beam_search(copy_model, src, beam_size=1, **OPTIONS)
    assert [hyps[0].tokens for hyps in beams] == greedy


def test_beam_of_one_is_greedy_for_sentences_ending_at_the_limit():
    model = lively_model()
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    greedy = greedy_decode(model, src, eos_id=9, **OPTIONS).tokens
    beams = beam_search(model, src, eos_id=9, beam_size=1, **OPTIONS)
    assert [hyps[0].tokens for hyps in beams] == greedy


@pytest.mark.parametrize("eos_id", [2, 9])
def test_scores_are_length_normalised_log_probabilities_best_first(eos_id):
    model = lively_model()
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    limits = output_limits(model, src, 1.0, 5).tolist()
    results = beam_search(model, src, eos_id=eos_id, beam_size=4, n_best=3, **OPTIONS)
    for i, hypotheses in enumerate(results):
        assert len(hypotheses) == 3
        assert [h.score for h in hypotheses] == sorted((h.score for h in hypotheses), reverse=True)
        for tokens, found in hypotheses:
            expected = score(model, src[i], tokens, limits[i], eos_id, alpha=0.6)
            assert found == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("eos_id", [2, 9])
def test_beam_search_scores_at_least_as_well_as_greedy(eos_id):
    model = lively_model()
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    limits = output_limits(model, src, 1.0, 5).tolist()
    greedy = greedy_decode(model, src, eos_id=eos_id, **OPTIONS).tokens
    beams = beam_search(model, src, eos_id=eos_id, beam_size=5, **OPTIONS)
    for i, (tokens, hypotheses) in enumerate(zip(greedy, beams, strict=True)):
        greedy_score = score(model, src[i], tokens, limits[i], eos_id, alpha=0.6)
        assert hypotheses[0].score >= greedy_score - 1e-5


def test_too_many_best_is_rejected_with_values():
    with pytest.raises(ValueError, match=r"beam_size=2, n_best=3"):
        beam_search(lively_model(), padded_batch([3], vocab_size=V), beam_size=2, n_best=3)


def test_beam_search_scores_at_least_as_well_as_greedy_on_a_trained_model(copy_model):
    src, _ = copy_batch(8, torch.Generator().manual_seed(1))
    limits = output_limits(copy_model, src, 1.0, 5).tolist()
    greedy = greedy_decode(copy_model, src, **OPTIONS).tokens
    beams = beam_search(copy_model, src, beam_size=5, **OPTIONS)
    greedy_scores = [score(copy_model, src[i], t, limits[i], 2, 0.6) for i, t in enumerate(greedy)]
    best_scores = [hypotheses[0].score for hypotheses in beams]
    assert all(b >= g - 1e-5 for b, g in zip(best_scores, greedy_scores, strict=True))
    assert any(b > g + 0.1 for b, g in zip(best_scores, greedy_scores, strict=True))

import pytest
import torch
from tiny_models import copy_batch, lively_model, padded_batch, search_options

from tfm.transformer import Transformer, beam_search, gnmt_length_penalty, greedy_decode
from tfm.transformer.decoding import output_limits

V = 16
SOURCE_LENGTHS = [9, 3, 6, 1, 7, 4]
OPTIONS = search_options(1.0, 5)
BEAM = dict(length_penalty=0.6)  # §6.1's alpha


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
    beams = beam_search(copy_model, src, beam_size=1, **OPTIONS, **BEAM)
    assert [hyps[0].tokens for hyps in beams] == greedy


def test_beam_of_one_is_greedy_for_sentences_ending_at_the_limit():
    model = lively_model()
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    options = search_options(1.0, 5, eos_id=9)
    greedy = greedy_decode(model, src, **options).tokens
    beams = beam_search(model, src, beam_size=1, **options, **BEAM)
    assert [hyps[0].tokens for hyps in beams] == greedy


@pytest.mark.parametrize("eos_id", [2, 9])
def test_scores_are_length_normalised_log_probabilities_best_first(eos_id):
    model = lively_model()
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    options = search_options(1.0, 5, eos_id=eos_id)
    limits = output_limits(model, src, options["limit"]).tolist()
    results = beam_search(model, src, beam_size=4, n_best=3, **options, **BEAM)
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
    options = search_options(1.0, 5, eos_id=eos_id)
    limits = output_limits(model, src, options["limit"]).tolist()
    greedy = greedy_decode(model, src, **options).tokens
    beams = beam_search(model, src, beam_size=5, **options, **BEAM)
    for i, (tokens, hypotheses) in enumerate(zip(greedy, beams, strict=True)):
        greedy_score = score(model, src[i], tokens, limits[i], eos_id, alpha=0.6)
        assert hypotheses[0].score >= greedy_score - 1e-5


def test_too_many_best_is_rejected_with_values():
    with pytest.raises(ValueError, match=r"beam_size=2, n_best=3"):
        src = padded_batch([3], vocab_size=V)
        beam_search(lively_model(), src, beam_size=2, n_best=3, **OPTIONS, **BEAM)


def test_beam_search_scores_at_least_as_well_as_greedy_on_a_trained_model(copy_model):
    src, _ = copy_batch(8, torch.Generator().manual_seed(1))
    limits = output_limits(copy_model, src, OPTIONS["limit"]).tolist()
    greedy = greedy_decode(copy_model, src, **OPTIONS).tokens
    beams = beam_search(copy_model, src, beam_size=5, **OPTIONS, **BEAM)
    greedy_scores = [score(copy_model, src[i], t, limits[i], 2, 0.6) for i, t in enumerate(greedy)]
    best_scores = [hypotheses[0].score for hypotheses in beams]
    assert all(b >= g - 1e-5 for b, g in zip(best_scores, greedy_scores, strict=True))
    assert any(b > g + 0.1 for b, g in zip(best_scores, greedy_scores, strict=True))

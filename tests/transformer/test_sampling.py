"""Sampling: a seed repeats the samples, temperature towards 0, top-k 1 (at the highest
temperature too) and the least top p are greedy search, and
the tokens drawn follow the model's distribution as temperature, top-k and top-p reshape it (a
chi-squared test over many draws of the first token, on a 16-token vocabulary)."""

import pytest
import torch
from sampling_checks import p_value, reshaped
from tiny_models import lively_model, padded_batch, search_options

from tfm.decoding_options import DECODING_SETTINGS
from tfm.transformer import greedy_decode, sample_decode

V = 16
SOURCE_LENGTHS = [9, 3, 6, 1, 7, 4]
DRAWS = 4000
FLAT = dict(temperature=1.0, top_k=0, top_p=1.0)  # the model's own distribution
LEAST = {setting.key: setting.low for setting in DECODING_SETTINGS}
MOST = {setting.key: setting.high for setting in DECODING_SETTINGS}


def samples(model, src, *, seed=0, n=1, options=None, **settings):
    generator = torch.Generator().manual_seed(seed)
    found = sample_decode(model, src, **(options or search_options(1.0, 5)), samples=n,
                          generator=generator, **{**FLAT, **settings})  # fmt: skip
    return [[h.tokens for h in hypotheses] for hypotheses in found]


def test_a_seed_draws_the_same_samples_and_another_seed_others():
    model, src = lively_model(), padded_batch(SOURCE_LENGTHS, vocab_size=V)
    first = samples(model, src, seed=3, n=4, temperature=2.0)
    assert samples(model, src, seed=3, n=4, temperature=2.0) == first
    assert samples(model, src, seed=4, n=4, temperature=2.0) != first
    assert all(len(drawn) == 4 for drawn in first)
    assert len({tuple(t) for drawn in first for t in drawn}) > len(SOURCE_LENGTHS)  # they vary


@pytest.mark.parametrize(
    "settings",
    [
        dict(temperature=1e-4),
        dict(top_k=1, temperature=3.0),
        dict(top_k=1, temperature=MOST["temperature"]),  # no tie of rounded log-probabilities
        dict(top_p=LEAST["top_p"]),
    ],
)
def test_near_zero_temperature_top_k_one_and_the_least_top_p_are_greedy_search(settings):
    model, src = lively_model(), padded_batch(SOURCE_LENGTHS, vocab_size=V)
    options = search_options(1.0, 5, eos_id=9)
    greedy = greedy_decode(model, src, **options).tokens
    drawn = samples(model, src, seed=1, n=3, options=options, **settings)
    assert [set(map(tuple, found)) for found in drawn] == [{tuple(tokens)} for tokens in greedy]
    assert samples(model, src, seed=1, n=1, options=options, temperature=3.0) != [
        [tokens] for tokens in greedy
    ]  # not greedy without them


def test_scores_are_the_models_log_probabilities_best_first():
    model, src = lively_model(), padded_batch(SOURCE_LENGTHS, vocab_size=V)
    generator = torch.Generator().manual_seed(0)
    options = search_options(1.0, 5)
    found = sample_decode(model, src, **options, samples=5, generator=generator,
                          temperature=2.0, top_k=8, top_p=0.9)  # fmt: skip
    limits = [options["limit"].tokens(n, model.max_len) for n in SOURCE_LENGTHS]
    with torch.no_grad():
        for i, hypotheses in enumerate(found):
            assert [h.score for h in hypotheses] == sorted(
                (h.score for h in hypotheses), reverse=True
            )
            for tokens, score in hypotheses:
                generated = tokens + [2] if len(tokens) < limits[i] else tokens
                prefix = torch.tensor([[1, *generated[:-1]]])
                log_probs = model(src[i : i + 1], prefix).log_softmax(dim=-1)[0]  # (T, V)
                expected = log_probs[torch.arange(len(generated)), generated].sum()
                assert score == pytest.approx(float(expected), abs=1e-4)


def first_tokens(model, src, **settings) -> torch.Tensor:
    """How often each token is drawn first, over DRAWS samples of one source (EOS included)."""
    options = search_options(0.0, 1, eos_id=2)  # one token each
    drawn = samples(model, src, seed=7, n=DRAWS, options=options, **{**FLAT, **settings})[0]
    first = [tokens[0] if tokens else 2 for tokens in drawn]
    return torch.bincount(torch.tensor(first), minlength=V).double()


SETTINGS = [
    dict(temperature=1.0, top_k=0, top_p=1.0),
    dict(temperature=0.7, top_k=5, top_p=1.0),
    dict(temperature=1.5, top_k=0, top_p=0.8),
    dict(temperature=1.3, top_k=6, top_p=0.7),
]


@pytest.mark.parametrize("settings", SETTINGS)
def test_draws_follow_the_models_distribution_as_reshaped(settings):
    model = lively_model(seed=2)
    src = padded_batch([5], vocab_size=V, seed=4)
    with torch.no_grad():
        log_probs = model(src, torch.tensor([[1]]))[0, -1].log_softmax(dim=-1)  # (V,)
    expected = reshaped(log_probs, **settings)
    assert int((expected > 0).sum()) > 3  # a distribution worth testing
    counts = first_tokens(model, src, **settings)
    assert p_value(counts, expected) > 1e-3
    other = reshaped(log_probs, **{**settings, "temperature": settings["temperature"] * 1.5})
    assert p_value(counts, other) < 1e-3  # the test tells a slightly different distribution

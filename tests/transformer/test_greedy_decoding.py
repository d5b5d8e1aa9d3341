import pytest
import torch
from tiny_models import copy_batch, lively_model, padded_batch, search_options
from transformer_helpers import greedy_decode_uncached

from tfm.transformer import greedy_decode
from tfm.transformer.decoding import output_limits

V = 16
SOURCE_LENGTHS = [9, 3, 6, 1, 7, 4]


def test_cached_greedy_equals_rerunning_the_whole_prefix(copy_model):
    src, _ = copy_batch(8, torch.Generator().manual_seed(1))
    options = search_options(1.0, 5)
    limits = output_limits(copy_model, src, options["limit"]).tolist()
    cached = greedy_decode(copy_model, src, **options).tokens
    uncached = greedy_decode_uncached(copy_model, src, **options)
    assert cached == uncached
    # The batch was exercised as meant: sentences of different lengths stopped at their EOS.
    assert len({len(tokens) for tokens in cached}) > 2
    stopped_at_eos = [len(t) < limit for t, limit in zip(cached, limits, strict=True)]
    assert sum(stopped_at_eos) >= len(cached) // 2


def test_cached_greedy_equals_rerunning_the_whole_prefix_for_pre_norm():
    model = lively_model("pre")
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    options = search_options(1.0, 5, eos_id=V + 1)  # runs to the length limit
    cached = greedy_decode(model, src, **options).tokens
    assert cached == greedy_decode_uncached(model, src, **options)
    assert len({tuple(tokens[:5]) for tokens in cached}) > 2  # outputs differ between sources


def test_outputs_respect_the_length_limit_a_times_source_length_plus_b():
    model = lively_model()
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    result = greedy_decode(model, src, **search_options(1.5, 2, eos_id=V + 1))  # no EOS
    assert [len(t) for t in result.tokens] == [int(1.5 * n + 2) for n in SOURCE_LENGTHS]


def test_length_limit_is_capped_by_the_positional_table():
    model = lively_model()
    src = padded_batch([9], vocab_size=V)
    options = search_options(100, 10, eos_id=V + 1)
    assert len(greedy_decode(model, src, **options).tokens[0]) == model.max_len


def test_a_sentence_that_starts_with_eos_is_empty():
    model = lively_model(norm_position="post")
    with torch.no_grad():  # every hidden state becomes all ones, which only the EOS row scores
        model.decoder.layers[-1].feed_forward_residual.norm.weight.zero_()
        model.decoder.layers[-1].feed_forward_residual.norm.bias.fill_(1.0)
        model.output_projection.weight.zero_()
        model.output_projection.weight[2] = 1.0
    result = greedy_decode(model, padded_batch([4, 2], vocab_size=V), **search_options())
    assert result.tokens == [[], []]


def test_returned_cross_attention_matches_the_explicit_full_pass():
    model = lively_model()
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    result = greedy_decode(model, src, **search_options(1.0, 3), return_attention=True)
    assert len(result.cross_attention) == len(SOURCE_LENGTHS)
    for i, (tokens, weights) in enumerate(zip(result.tokens, result.cross_attention, strict=True)):
        n = SOURCE_LENGTHS[i]
        assert weights.shape == (2, 4, len(tokens), n)  # (L, H, T_out, S_real)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, len(tokens)))
        prefix = torch.tensor([[1, *tokens[:-1]]]) if tokens else torch.tensor([[1]])
        maps = model.attention_maps(src[i : i + 1, :n], prefix)
        expected = torch.stack(maps["cross"], dim=1)[0, :, :, : len(tokens)]  # (L, H, T_out, S)
        torch.testing.assert_close(weights, expected, atol=1e-5, rtol=1e-5)


def test_greedy_decode_returns_plain_ints_and_no_attention_by_default():
    result = greedy_decode(lively_model(), padded_batch([3, 5], vocab_size=V), **search_options())
    assert result.cross_attention is None
    assert all(isinstance(token, int) for tokens in result.tokens for token in tokens)


@torch.no_grad()
def test_greedy_scores_are_the_log_probabilities_of_its_outputs():
    model = lively_model()
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    result = greedy_decode(model, src, **search_options(1.0, 5))
    limits = output_limits(model, src, search_options(1.0, 5)["limit"]).tolist()
    for i, (tokens, found) in enumerate(zip(result.tokens, result.scores, strict=True)):
        generated = tokens + [2] if len(tokens) < limits[i] else tokens  # with its EOS
        prefix = torch.tensor([[1, *generated[:-1]]])
        log_probs = model(src[i : i + 1], prefix).log_softmax(dim=-1)[0]  # (T, V)
        expected = log_probs[torch.arange(len(generated)), generated].sum()
        assert found == pytest.approx(float(expected), abs=1e-4)


def test_decode_steps_match_the_full_decoder_also_when_the_cache_grows():
    model = lively_model()
    src = padded_batch([5, 3], vocab_size=V)
    tgt = padded_batch([7, 7], vocab_size=V, seed=1)
    memory = model.encode(src)
    full = model.decode(tgt, memory, src)  # (B, T, V)
    cache = model.start_cache(memory, src, capacity=2)  # too small: must grow on the way
    step = model.decode_step(tgt[:, :3], cache)  # several positions at once, then one by one
    torch.testing.assert_close(step.logits, full[:, 2], atol=1e-5, rtol=1e-5)
    for t in range(3, 7):
        step = model.decode_step(tgt[:, t : t + 1], step.cache)
        torch.testing.assert_close(step.logits, full[:, t], atol=1e-5, rtol=1e-5)
    assert step.cache.length == 7


def test_decoding_runs_under_bfloat16_autocast_with_a_bfloat16_cache():
    model = lively_model()
    src = padded_batch([5, 3], vocab_size=V)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        result = greedy_decode(model, src, **search_options(0, 4, eos_id=V + 1))
        cache = model.start_cache(model.encode(src), src)
        step = model.decode_step(torch.ones(2, 1, dtype=torch.long), cache)
    assert [len(tokens) for tokens in result.tokens] == [4, 4]
    assert step.cache.self_attention[0].buffers.keys.dtype == torch.bfloat16

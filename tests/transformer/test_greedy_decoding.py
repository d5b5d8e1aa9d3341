import pytest
import torch
from tiny_models import copy_batch, lively_model, padded_batch
from transformer_helpers import greedy_decode_uncached

from tfm.transformer import greedy_decode
from tfm.transformer.decoding import output_limits

V = 16
SOURCE_LENGTHS = [9, 3, 6, 1, 7, 4]


def test_cached_greedy_equals_rerunning_the_whole_prefix(copy_model):
    src, _ = copy_batch(8, torch.Generator().manual_seed(1))
    limits = output_limits(copy_model, src, 1.0, 5).tolist()
    cached = greedy_decode(copy_model, src, max_len_a=1.0, max_len_b=5).tokens
    uncached = greedy_decode_uncached(copy_model, src, max_len_a=1.0, max_len_b=5).tokens
    assert cached == uncached
    # The batch was exercised as meant: sentences of different lengths stopped at their EOS.
    assert len({len(tokens) for tokens in cached}) > 2
    stopped_at_eos = [len(t) < limit for t, limit in zip(cached, limits, strict=True)]
    assert sum(stopped_at_eos) >= len(cached) // 2


def test_cached_greedy_equals_rerunning_the_whole_prefix_for_pre_norm():
    model = lively_model("pre")
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    options = dict(eos_id=V + 1, max_len_a=1.0, max_len_b=5)  # runs to the length limit
    cached = greedy_decode(model, src, **options).tokens
    assert cached == greedy_decode_uncached(model, src, **options).tokens
    assert len({tuple(tokens[:5]) for tokens in cached}) > 2  # outputs differ between sources


def test_outputs_respect_the_length_limit_a_times_source_length_plus_b():
    model = lively_model()
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    result = greedy_decode(model, src, eos_id=V + 1, max_len_a=1.5, max_len_b=2)  # no EOS
    assert [len(t) for t in result.tokens] == [int(1.5 * n + 2) for n in SOURCE_LENGTHS]


def test_length_limit_is_capped_by_the_positional_table():
    model = lively_model()
    src = padded_batch([9], vocab_size=V)
    assert len(greedy_decode(model, src, eos_id=V + 1, max_len_a=100).tokens[0]) == model.max_len


def test_a_sentence_that_starts_with_eos_is_empty():
    model = lively_model(norm_position="post")
    with torch.no_grad():  # every hidden state becomes all ones, which only the EOS row scores
        model.decoder.layers[-1].feed_forward_residual.norm.weight.zero_()
        model.decoder.layers[-1].feed_forward_residual.norm.bias.fill_(1.0)
        model.output_projection.weight.zero_()
        model.output_projection.weight[2] = 1.0
    result = greedy_decode(model, padded_batch([4, 2], vocab_size=V), eos_id=2)
    assert result.tokens == [[], []]


def test_returned_cross_attention_matches_the_explicit_full_pass():
    model = lively_model()
    src = padded_batch(SOURCE_LENGTHS, vocab_size=V)
    result = greedy_decode(model, src, max_len_a=1.0, max_len_b=3, return_attention=True)
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
    result = greedy_decode(lively_model(), padded_batch([3, 5], vocab_size=V))
    assert result.cross_attention is None
    assert all(isinstance(token, int) for tokens in result.tokens for token in tokens)


def test_negative_length_slope_is_rejected_with_value():
    with pytest.raises(ValueError, match=r"max_len_a=-1"):
        greedy_decode(lively_model(), padded_batch([3], vocab_size=V), max_len_a=-1)


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
        result = greedy_decode(model, src, eos_id=V + 1, max_len_a=0, max_len_b=4)
        cache = model.start_cache(model.encode(src), src)
        step = model.decode_step(torch.ones(2, 1, dtype=torch.long), cache)
    assert [len(tokens) for tokens in result.tokens] == [4, 4]
    assert step.cache.self_attention[0].buffers.keys.dtype == torch.bfloat16

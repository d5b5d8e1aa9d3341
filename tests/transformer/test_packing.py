"""Packed batches: the model over a batch's real tokens laid end to end computes what it computes
over the padded batch, outputs and gradients, in float32 on the CPU; and attention of packed
sentences equals attention of each sentence alone."""

import pytest
import torch
from tiny_models import padded_batch, single_thread

from tfm.training.loss import projected_loss_sum
from tfm.transformer import ModelArgs, PackedBatch, PackedMask, Packing, build_model
from tfm.transformer.multihead_attention import scaled_dot_product_attention

V = 40
SRC_LENGTHS = [7, 3, 9, 1, 5]
TGT_LENGTHS = [6, 8, 2, 4, 1]  # real target tokens (tgt_out), BOS first in tgt_in


def tiny_model(norm_position: str):
    torch.manual_seed(0)
    args = ModelArgs(
        src_vocab_size=V, tgt_vocab_size=V, d_model=32, n_heads=4, n_encoder_layers=2,
        n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64, norm_position=norm_position,
    )  # fmt: skip
    return build_model(args).train()


def batch(src_lengths=SRC_LENGTHS, tgt_lengths=TGT_LENGTHS):
    """src (B, S), tgt_in (B, T) and tgt_out (B, T), right-padded with 0 as a collated batch is."""
    src = padded_batch(src_lengths, vocab_size=V, seed=1)
    tgt = padded_batch([n + 1 for n in tgt_lengths], vocab_size=V, seed=2)
    return src, tgt[:, :-1], tgt[:, 1:]


def packed_inputs(src, tgt_in, tgt_out):
    """The packed ids and packings of a padded batch, as the training step makes them."""
    packed = PackedBatch(Packing.of(src != 0), Packing.of(tgt_out != 0))
    return src[src != 0][None], tgt_in[tgt_out != 0][None], packed


def loss_and_gradients(model, hidden, targets):
    model.zero_grad(set_to_none=True)
    weight = model.output_projection.weight
    loss = projected_loss_sum(hidden, weight, targets, label_smoothing=0.1)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("norm_position", ["post", "pre"])
@pytest.mark.parametrize(
    "src_lengths", [SRC_LENGTHS, [4] * 5], ids=["padded sources", "no source padding"]
)
def test_a_packed_batch_gives_the_padded_batchs_outputs_loss_and_gradients(
    norm_position, src_lengths
):
    model = tiny_model(norm_position)
    src, tgt_in, tgt_out = batch(src_lengths)
    real = tgt_out != 0
    with single_thread():
        hidden = model(src, tgt_in, project=False).flatten(0, 1)[real.flatten()]  # (N, D)
        loss, grads = loss_and_gradients(model, hidden, tgt_out[real])
        src_ids, tgt_ids, packed = packed_inputs(src, tgt_in, tgt_out)
        packed_hidden = model(src_ids, tgt_ids, packed=packed, project=False)
        packed_loss, packed_grads = loss_and_gradients(model, packed_hidden, tgt_out[real])
    assert packed_hidden.shape == hidden.shape == (sum(TGT_LENGTHS), 32)
    torch.testing.assert_close(packed_hidden, hidden)
    torch.testing.assert_close(packed_loss, loss)
    assert packed_grads.keys() == grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(packed_grads[name], grad, msg=name)


def test_packed_logits_are_the_kept_positions_logits():
    model = tiny_model("post").eval()
    src, tgt_in, tgt_out = batch()
    keep = tgt_out != 0
    with torch.no_grad(), single_thread():
        expected = model(src, tgt_in, keep=keep)  # (N, V)
        src_ids, tgt_ids, packed = packed_inputs(src, tgt_in, tgt_out)
        got = model(src_ids, tgt_ids, packed=packed)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("is_causal", [False, True])
def test_packed_attention_equals_each_sentence_attended_alone(is_causal):
    generator = torch.Generator().manual_seed(0)
    lengths = [5, 2, 7]
    keys_lengths = lengths if is_causal else [3, 6, 1]
    H, K = 2, 8
    query = torch.randn(1, H, sum(lengths), K, generator=generator)
    key, value = torch.randn(2, 1, H, sum(keys_lengths), K, generator=generator)
    queries = Packing.of(padded_batch(lengths, vocab_size=9) != 0)
    keys = queries if is_causal else Packing.of(padded_batch(keys_lengths, vocab_size=9) != 0)
    out, weights = scaled_dot_product_attention(
        query, key, value, mask=PackedMask(queries, keys), is_causal=is_causal
    )
    assert weights is None and out.shape == query.shape
    q_start = k_start = 0
    for q_len, k_len in zip(lengths, keys_lengths, strict=True):
        q_end, k_end = q_start + q_len, k_start + k_len
        alone, _ = scaled_dot_product_attention(
            query[:, :, q_start:q_end],
            key[:, :, k_start:k_end],
            value[:, :, k_start:k_end],
            is_causal=is_causal,
            need_weights=True,  # the explicit eq. (1) path
        )
        torch.testing.assert_close(out[:, :, q_start:q_end], alone)
        q_start, k_start = q_end, k_end


def test_packing_records_positions_offsets_and_lengths():
    real = padded_batch([3, 1, 2], vocab_size=9) != 0
    packing = Packing.of(real)
    assert packing.positions.tolist() == [0, 1, 2, 0, 0, 1]
    assert packing.index.tolist() == [0, 1, 2, 3, 6, 7]
    assert packing.offsets.tolist() == [0, 3, 4, 6]
    assert (packing.min_len, packing.max_len, packing.width, packing.all_real) == (1, 3, 3, False)
    x = torch.arange(6.0).view(1, 1, 6, 1)  # (1, H, N, K)
    assert packing.unpack(x).view(3, 3).tolist() == [[0, 1, 2], [3, 0, 0], [4, 5, 0]]
    torch.testing.assert_close(packing.pack(packing.unpack(x)), x)


def test_attention_weights_of_a_packed_batch_are_refused():
    packing = Packing.of(torch.ones(1, 2, dtype=torch.bool))
    x = torch.zeros(1, 1, 2, 4)
    with pytest.raises(ValueError, match="packed batch"):
        scaled_dot_product_attention(x, x, x, mask=PackedMask(packing, packing), need_weights=True)


def test_a_packed_batch_longer_than_the_positional_table_is_refused():
    model = tiny_model("post")
    src = torch.ones(1, 65, dtype=torch.long)
    packed = PackedBatch(Packing.of(src != 0), Packing.of(src != 0))
    with pytest.raises(ValueError, match=r"input length 65 .* max_len=64"):
        model(src, src, packed=packed)


@pytest.mark.filterwarnings("ignore::UserWarning")  # nested tensors' prototype-stage notices
def test_the_variable_length_route_gives_the_padded_routes_outputs_and_gradients():
    # The route a CUDA GPU takes, run here on the CPU's nested-tensor kernel, which has no causal
    # attention: cross-attention of 3 target sentences to 3 source sentences.
    generator = torch.Generator().manual_seed(0)
    queries = Packing.of(padded_batch([3, 1, 2], vocab_size=9) != 0)
    keys = Packing.of(padded_batch([2, 3, 1], vocab_size=9) != 0)
    mask = PackedMask(queries, keys)
    rows = [torch.randn(6, 2, 8, generator=generator, requires_grad=True) for _ in range(3)]
    query, key, value = (x.transpose(0, 1)[None] for x in rows)  # (1, H, N, K)
    varlen = mask.varlen_attention(query, key, value, is_causal=False, dropout_p=0.0)
    padded, _ = scaled_dot_product_attention(query, key, value, mask=mask)
    torch.testing.assert_close(varlen, padded)
    varlen_grads = torch.autograd.grad(varlen.square().sum(), rows)
    padded_grads = torch.autograd.grad(padded.square().sum(), rows)
    for ours, theirs in zip(varlen_grads, padded_grads, strict=True):
        torch.testing.assert_close(ours, theirs)

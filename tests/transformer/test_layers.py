import pytest
import torch
from torch import nn
from transformer_helpers import (
    causal_for_reference,
    copy_decoder_layer,
    copy_encoder_layer,
    randomize,
)

from tfm.transformer import DecoderLayer, Encoder, EncoderLayer, ModelArgs

D, H, F = 32, 4, 64


def sizes(**options) -> ModelArgs:
    return ModelArgs(src_vocab_size=16, tgt_vocab_size=16, d_model=D, n_heads=H, d_ff=F,
                     n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, **options)  # fmt: skip


def real_keys(lengths: list[int], total: int) -> torch.Tensor:
    return torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]  # (B, S) True = real


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_encoder_layer_matches_nn_transformer_encoder_layer(norm_position, no_fast_path):
    reference = nn.TransformerEncoderLayer(
        D, H, F, dropout=0.0, batch_first=True, norm_first=norm_position == "pre"
    )
    reference = randomize(reference).eval()
    ours = EncoderLayer(sizes(norm_position=norm_position)).eval()
    copy_encoder_layer(ours, reference)
    x, real = torch.randn(3, 7, D), real_keys([7, 5, 2], 7)
    expected = reference(x, src_key_padding_mask=~real)
    out, _ = ours(x, mask=real[:, None, None, :])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_decoder_layer_matches_nn_transformer_decoder_layer(norm_position, no_fast_path):
    reference = nn.TransformerDecoderLayer(
        D, H, F, dropout=0.0, batch_first=True, norm_first=norm_position == "pre"
    )
    reference = randomize(reference, seed=3).eval()
    ours = DecoderLayer(sizes(norm_position=norm_position)).eval()
    copy_decoder_layer(ours, reference)
    x, memory, real = torch.randn(3, 6, D), torch.randn(3, 8, D), real_keys([8, 4, 1], 8)
    expected = reference(
        x, memory, tgt_mask=causal_for_reference(6), memory_key_padding_mask=~real,
        tgt_is_causal=True,
    )  # fmt: skip
    memory_kv = ours.cross_attention.project_context(memory)
    out, _, _, _ = ours(x, memory_kv, memory_mask=real[:, None, None, :])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_only_pre_norm_stacks_end_with_a_layer_norm():
    assert Encoder(sizes(norm_position="post")).final_norm is None
    assert isinstance(Encoder(sizes(norm_position="pre")).final_norm, nn.LayerNorm)


def test_unknown_norm_position_is_rejected_with_value():
    with pytest.raises(ValueError, match=r"norm_position='middle' is not one of \('post', 'pre'\)"):
        EncoderLayer(sizes(norm_position="middle"))

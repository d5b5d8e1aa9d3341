import math

import pytest
import torch

from tfm.transformer import PositionalEncoding, TokenEmbedding, sinusoidal_table


@pytest.mark.parametrize("position", [0, 1, 7, 99])
@pytest.mark.parametrize("dimension", [0, 1, 2, 17, 62, 63])
def test_positional_encoding_follows_the_formula(position, dimension):
    d_model = 64
    table = sinusoidal_table(100, d_model)
    i = dimension // 2
    angle = position / 10000 ** (2 * i / d_model)
    expected = math.sin(angle) if dimension % 2 == 0 else math.cos(angle)
    assert table[position, dimension].item() == pytest.approx(expected, abs=1e-7)


def test_positional_encoding_is_added_from_the_offset():
    encoding = PositionalEncoding(d_model=8, max_len=10)
    x = torch.zeros(2, 3, 8)
    torch.testing.assert_close(encoding(x, offset=4), encoding.table[4:7].expand(2, 3, 8))


def test_positional_table_is_a_buffer_not_a_parameter_nor_checkpointed():
    encoding = PositionalEncoding(d_model=8, max_len=10)
    assert "table" in dict(encoding.named_buffers())
    assert list(encoding.parameters()) == []
    assert "table" not in encoding.state_dict()


def test_input_longer_than_table_names_both_lengths():
    encoding = PositionalEncoding(d_model=8, max_len=10)
    with pytest.raises(ValueError, match=r"input length 12 .*max_len=10"):
        encoding(torch.zeros(1, 12, 8))
    with pytest.raises(ValueError, match=r"input length 11 .*max_len=10"):
        encoding(torch.zeros(1, 2, 8), offset=9)


def test_odd_d_model_is_rejected_with_value():
    with pytest.raises(ValueError, match=r"d_model=7 must be even"):
        PositionalEncoding(d_model=7, max_len=10)


def test_token_embedding_is_scaled_by_sqrt_d_model():
    embedding = TokenEmbedding(vocab_size=5, d_model=16)
    ids = torch.tensor([[0, 3, 4]])
    torch.testing.assert_close(embedding(ids), embedding.weight[ids] * 4.0)

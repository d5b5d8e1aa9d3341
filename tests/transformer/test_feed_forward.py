import pytest
import torch
import torch.nn.functional as F

from tfm.transformer import PositionwiseFeedForward


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_is_eq_2_with_the_chosen_activation(activation):
    ffn = PositionwiseFeedForward(d_model=8, d_ff=32, activation=activation)
    x = torch.randn(2, 5, 8)
    hidden = x @ ffn.w_1.weight.T + ffn.w_1.bias
    hidden = hidden.clamp(min=0) if activation == "relu" else F.gelu(hidden)
    torch.testing.assert_close(ffn(x), hidden @ ffn.w_2.weight.T + ffn.w_2.bias)


def test_feed_forward_acts_on_each_position_separately():
    ffn = PositionwiseFeedForward(d_model=8, d_ff=16)
    x = torch.randn(1, 4, 8)
    torch.testing.assert_close(ffn(x)[:, 2], ffn(x[:, 2:3])[:, 0])


def test_unknown_activation_is_rejected_with_value():
    with pytest.raises(ValueError, match=r"activation='tanh' is not one of \['gelu', 'relu'\]"):
        PositionwiseFeedForward(d_model=8, d_ff=16, activation="tanh")

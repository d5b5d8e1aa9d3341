import pytest
import torch
import torch.nn.functional as F

from tfm.transformer import PositionwiseFeedForward
from tfm.transformer.dropout import drop_mask


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


def test_activation_dropout_drops_hidden_units_in_training_only():
    ffn = PositionwiseFeedForward(d_model=8, d_ff=64, activation_dropout=0.5)
    x = torch.randn(2, 5, 8)
    torch.manual_seed(3)
    dropped = ffn(x)
    torch.manual_seed(3)
    hidden = F.relu(ffn.w_1(x))
    hidden = (2 * hidden).masked_fill(drop_mask(hidden.shape, 0.5), 0.0)
    torch.testing.assert_close(dropped, ffn.w_2(hidden))
    ffn.eval()
    torch.testing.assert_close(ffn(x), ffn.w_2(F.relu(ffn.w_1(x))))
    assert not torch.allclose(dropped, ffn(x))


def test_activation_dropout_outside_0_1_is_rejected_with_value():
    with pytest.raises(ValueError, match=r"activation_dropout=1.0 is not in \[0, 1\)"):
        PositionwiseFeedForward(d_model=8, d_ff=16, activation_dropout=1.0)

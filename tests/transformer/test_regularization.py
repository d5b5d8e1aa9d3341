"""§5.4 residual dropout: tfm's cheaper-mask Dropout behaves like nn.Dropout."""

import pytest
import torch

from tfm.transformer.regularization import Dropout, dropout_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_mask_drops_about_p_of_the_elements_independently_of_position(p):
    torch.manual_seed(0)
    keep = dropout_mask(torch.Size([1000, 1000]), p, device=torch.device("cpu"))
    assert keep.dtype == torch.bool and keep.shape == (1000, 1000)
    dropped = 1.0 - keep.float()
    # 1e6 Bernoulli(p) draws: the standard error is below 5e-4
    assert abs(float(dropped.mean()) - p) < 3e-3
    # neighbours (the two halves of one 32-bit draw) are uncorrelated, and so are rows
    pairs = dropped.view(-1, 2)
    assert abs(float((pairs[:, 0] * pairs[:, 1]).mean()) - p * p) < 3e-3
    assert abs(float(dropped.mean(dim=1).std()) - (p * (1 - p) / 1000) ** 0.5) < 3e-3


def test_training_zeroes_or_scales_each_element_and_gradient_follows_the_mask():
    torch.manual_seed(1)
    layer = Dropout(0.25).train()
    x = torch.randn(64, 33, requires_grad=True)  # odd element count: half a draw left over
    y = layer(x)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / 0.75)
    assert 0.15 < 1 - float(kept.float().mean()) < 0.35
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() / 0.75)


def test_eval_mode_and_p_zero_are_the_identity_and_seeds_reproduce():
    x = torch.randn(8, 16)
    assert Dropout(0.3).eval()(x) is x
    assert Dropout(0.0).train()(x) is x
    torch.manual_seed(7)
    first = Dropout(0.3).train()(x)
    torch.manual_seed(7)
    torch.testing.assert_close(Dropout(0.3).train()(x), first)


def test_p_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match=r"dropout=1.0 is not in \[0, 1\)"):
        Dropout(1.0)

import pytest
import torch
import torch.nn.functional as F

from tfm.transformer.dropout import Dropout, drop_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drop_mask_drops_each_element_with_probability_p_in_every_16_bit_lane(p):
    torch.manual_seed(0)
    dropped = drop_mask((1000, 1000), p).flatten().float()
    assert abs(dropped.mean().item() - p) < 0.002  # 1e6 draws: standard error < 0.0005
    for lane in range(4):  # the four 16-bit slices of each 64-bit draw, the sign bit's too
        assert abs(dropped[lane::4].mean().item() - p) < 0.004
    neighbours = (dropped[:-1] * dropped[1:]).mean().item()  # independent: p * p
    assert abs(neighbours - p * p) < 0.002


def test_drop_mask_follows_torchs_seed_and_odd_sizes():
    torch.manual_seed(5)
    first = drop_mask((3, 7, 5), 0.5)
    torch.manual_seed(5)
    assert torch.equal(first, drop_mask((3, 7, 5), 0.5))  # 105 elements: not a multiple of 4
    assert first.shape == (3, 7, 5) and first.dtype == torch.bool
    assert not torch.equal(first, drop_mask((3, 7, 5), 0.5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_scales_what_it_keeps_and_its_gradient_is_the_same_mask(dtype):
    dropout = Dropout(0.25)
    x = torch.randn(64, 33, dtype=dtype, requires_grad=True)
    torch.manual_seed(1)
    y = dropout(x)
    torch.manual_seed(1)
    dropped = drop_mask(x.shape, 0.25)
    expected = torch.where(dropped, 0.0, x.detach() * (1 / 0.75))
    torch.testing.assert_close(y, expected, rtol=0, atol=0)
    assert y.dtype == dtype
    upstream = torch.randn_like(y)
    y.backward(upstream)
    torch.testing.assert_close(x.grad, torch.where(dropped, 0.0, upstream * (1 / 0.75)))


def test_dropout_is_the_identity_in_eval_mode_and_at_zero():
    x = torch.randn(4, 9)
    assert Dropout(0.5).eval()(x) is x
    assert Dropout(0.0)(x) is x
    with pytest.raises(ValueError, match=r"dropout=1.0 is not in \[0, 1\)"):
        Dropout(1.0)


def test_dropout_keeps_the_expected_value_like_nn_dropout():
    torch.manual_seed(2)
    x = torch.full((2000, 500), 3.0)
    ours, theirs = Dropout(0.1)(x), F.dropout(x, 0.1, training=True)
    assert abs(ours.mean().item() - theirs.mean().item()) < 0.01  # both 3.0 in expectation
    assert abs((ours == 0).float().mean().item() - 0.1) < 0.002


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_dropout_on_cuda_is_f_dropout():
    x = torch.randn(8, 16, device="cuda")
    torch.manual_seed(3)
    ours = Dropout(0.3)(x)
    torch.manual_seed(3)
    torch.testing.assert_close(ours, F.dropout(x, 0.3, training=True))

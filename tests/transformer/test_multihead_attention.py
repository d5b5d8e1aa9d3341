import math

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from transformer_helpers import copy_attention, randomize

from tfm.transformer import MultiHeadAttention, scaled_dot_product_attention
from tfm.transformer.multihead_attention import causal_mask

B, H, D = 3, 4, 32


def make_pair(seed: int = 0) -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    reference = randomize(nn.MultiheadAttention(D, H, batch_first=True), seed=seed).eval()
    ours = MultiHeadAttention(d_model=D, n_heads=H).eval()
    copy_attention(ours, reference)
    return ours, reference


def key_padding(lengths: list[int], total: int) -> torch.Tensor:
    """(B, total) True = real key."""
    return torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]


def test_self_attention_with_padding_matches_nn_multihead_attention(no_fast_path):
    ours, reference = make_pair()
    x = torch.randn(B, 7, D)
    real = key_padding([7, 4, 1], 7)
    expected, expected_weights = reference(
        x, x, x, key_padding_mask=~real, need_weights=True, average_attn_weights=False
    )
    mask = real[:, None, None, :]  # (B, 1, 1, S)
    out, weights = ours(x, mask=mask, need_weights=True)
    fast, no_weights = ours(x, mask=mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast, expected, atol=1e-5, rtol=1e-5)
    assert no_weights is None


def test_causal_self_attention_matches_nn_multihead_attention(no_fast_path):
    ours, reference = make_pair(seed=1)
    x = torch.randn(B, 6, D)
    expected, expected_weights = reference(
        x, x, x, attn_mask=~causal_mask(6, 6), need_weights=True, average_attn_weights=False
    )
    out, weights = ours(x, is_causal=True, need_weights=True)
    fast, _ = ours(x, is_causal=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast, expected, atol=1e-5, rtol=1e-5)


def test_cross_attention_matches_nn_multihead_attention(no_fast_path):
    ours, reference = make_pair(seed=2)
    x, memory = torch.randn(B, 5, D), torch.randn(B, 8, D)
    real = key_padding([8, 3, 6], 8)
    expected, expected_weights = reference(
        x, memory, memory, key_padding_mask=~real, need_weights=True, average_attn_weights=False
    )
    out, weights = ours(x, memory, mask=real[:, None, None, :], need_weights=True)
    assert weights.shape == (B, H, 5, 8)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("use_mask", [False, True])
def test_explicit_path_equals_fast_path(is_causal, use_mask):
    q, k, v = torch.randn(2, H, 3, 8), torch.randn(2, H, 5, 8), torch.randn(2, H, 5, 8)
    mask = key_padding([5, 2], 5)[:, None, None, :] if use_mask else None
    fast, _ = scaled_dot_product_attention(q, k, v, mask=mask, is_causal=is_causal)
    explicit, weights = scaled_dot_product_attention(
        q, k, v, mask=mask, is_causal=is_causal, need_weights=True
    )
    torch.testing.assert_close(fast, explicit, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, H, 3))


def test_explicit_path_is_eq_1():
    q, k, v = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4)
    out, weights = scaled_dot_product_attention(q, k, v, need_weights=True)
    expected_weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(4), dim=-1)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(out, expected_weights @ v)


def test_causal_mask_is_bottom_right_aligned():
    # Two new queries after three cached keys: the first sees keys 0..3, the second all five.
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(2, 5), expected)


@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_row_gives_zeros_not_nan(need_weights):
    q, k, v = torch.randn(2, H, 3, 8), torch.randn(2, H, 5, 8), torch.randn(2, H, 5, 8)
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    mask[1] = False  # the second sequence has no key to attend to
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=need_weights)
    assert not out.isnan().any()
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    if need_weights:
        assert torch.equal(weights[1], torch.zeros_like(weights[1]))


def test_multi_head_attention_returns_per_head_weights():
    ours = MultiHeadAttention(d_model=D, n_heads=H)
    _, weights = ours(torch.randn(B, 6, D), torch.randn(B, 9, D), need_weights=True)
    assert weights.shape == (B, H, 6, 9)


def test_d_model_not_divisible_by_n_heads_is_rejected_with_values():
    with pytest.raises(ValueError, match=r"d_model=30 is not divisible by n_heads=4"):
        MultiHeadAttention(d_model=30, n_heads=4)


def test_attention_dropout_out_of_range_is_rejected_with_value():
    with pytest.raises(ValueError, match=r"attention_dropout=1.5"):
        MultiHeadAttention(d_model=8, n_heads=2, attention_dropout=1.5)


class AttentionKernelDtypes(TorchDispatchMode):
    """Records the dtype of the query that reaches PyTorch's fused attention kernel (below autocast,
    so after any cast autocast makes)."""

    def __init__(self) -> None:
        super().__init__()
        self.dtypes: list[torch.dtype] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "scaled_dot_product" in str(func) and "backward" not in str(func):
            self.dtypes.append(args[0].dtype)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("given", [torch.bfloat16, torch.float32])
def test_bf16_training_on_cpu_runs_the_fused_kernel_in_float32(given):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, H, 6, 8).to(given).requires_grad_() for _ in range(3))
    mask = key_padding([6, 3], 6)[:, None, None, :]
    with torch.autocast("cpu", dtype=torch.bfloat16), AttentionKernelDtypes() as seen:
        out, _ = scaled_dot_product_attention(q, k, v, mask=mask, is_causal=True)
    assert seen.dtypes == [torch.float32]  # its bfloat16 backward is several times slower
    assert out.dtype == torch.bfloat16
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=mask & causal_mask(6, 6)
    )
    torch.testing.assert_close(out, expected.to(torch.bfloat16), rtol=0, atol=0)
    out.float().sum().backward()
    assert q.grad is not None and q.grad.dtype == given and bool(q.grad.abs().sum() > 0)


def test_bf16_attention_without_a_backward_pass_stays_in_bf16():
    q, k, v = (torch.randn(2, H, 6, 8, requires_grad=True) for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16), AttentionKernelDtypes() as seen:
        with torch.no_grad():
            no_grad, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
        frozen, _ = scaled_dot_product_attention(q.detach(), k.detach(), v.detach())
    assert seen.dtypes == [torch.bfloat16, torch.bfloat16]  # as fast as float32 forwards
    assert no_grad.dtype == frozen.dtype == torch.bfloat16

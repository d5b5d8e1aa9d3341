"""The training loss: the chunked projection + cross-entropy against F.cross_entropy on the
full logits, values and both gradients."""

import pytest
import torch
import torch.nn.functional as F

from tfm.loss import projected_loss_sum, rdrop_loss_sum, token_loss_sum

V, D = 50, 16


def inputs(n: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, D, generator=generator, requires_grad=True)
    weight = torch.randn(V, D, generator=generator, requires_grad=True)
    targets = torch.randint(0, V, (n,), generator=generator)
    return hidden, weight, targets


def loss_and_gradients(loss_fn, hidden, weight, targets, scale: float):
    hidden.grad = weight.grad = None
    loss = loss_fn(hidden, weight, targets)
    (loss * scale).backward()  # a non-unit upstream gradient, as the loop's 1 / n_tokens
    return loss.detach(), hidden.grad.clone(), weight.grad.clone()


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("chunk", [1, 7, 37, 1024])  # 37 rows: one chunk, a ragged last chunk...
def test_projected_loss_matches_cross_entropy_of_the_full_logits(label_smoothing, chunk):
    hidden, weight, targets = inputs(37)

    def reference(h, w, t):
        return F.cross_entropy(h @ w.t(), t, label_smoothing=label_smoothing, reduction="sum")

    def ours(h, w, t):
        return projected_loss_sum(h, w, t, label_smoothing=label_smoothing, chunk=chunk)

    expected = loss_and_gradients(reference, hidden, weight, targets, scale=0.25)
    got = loss_and_gradients(ours, hidden, weight, targets, scale=0.25)
    for ours_value, theirs in zip(got, expected, strict=True):
        torch.testing.assert_close(ours_value, theirs, atol=1e-5, rtol=1e-5)


def test_projected_loss_equals_token_loss_sum_of_the_real_positions():
    hidden, weight, _ = inputs(12)
    targets = torch.tensor([5, 9, 0, 0, 7, 1, 2, 0, 3, 4, 0, 0])  # 0 = padding
    real = targets != 0
    expected = token_loss_sum(
        (hidden @ weight.t()).view(3, 4, V), targets.view(3, 4), pad_id=0, label_smoothing=0.1
    )
    got = projected_loss_sum(hidden[real], weight, targets[real], label_smoothing=0.1, chunk=3)
    torch.testing.assert_close(got, expected)


def test_projected_loss_under_bf16_autocast_is_close_and_keeps_float32_gradients():
    hidden, weight, targets = inputs(40)
    expected = loss_and_gradients(
        lambda h, w, t: projected_loss_sum(h, w, t, label_smoothing=0.1),
        hidden,
        weight,
        targets,
        1.0,
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = loss_and_gradients(
            lambda h, w, t: projected_loss_sum(h, w, t, label_smoothing=0.1, chunk=16),
            hidden, weight, targets, 1.0,
        )  # fmt: skip
    assert got[0].dtype == torch.float32
    assert got[1].dtype == got[2].dtype == torch.float32
    torch.testing.assert_close(got[0], expected[0], rtol=2e-2, atol=0.0)
    for ours_value, theirs in zip(got[1:], expected[1:], strict=True):
        torch.testing.assert_close(ours_value, theirs, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("chunk", [1, 4, 512])  # 9 pairs: one per chunk, a ragged last, one chunk
def test_rdrop_loss_is_mean_cross_entropy_plus_a_quarter_alpha_of_both_kl_divergences(
    label_smoothing, chunk
):
    hidden, weight, targets = inputs(2 * 9)
    targets = targets[:9]
    alpha = 5.0

    def reference(h, w, t):
        logits = h @ w.t()
        first, second = logits[:9], logits[9:]
        ce = sum(F.cross_entropy(z, t, label_smoothing=label_smoothing, reduction="sum")
                 for z in (first, second))  # fmt: skip
        p1, p2 = F.log_softmax(first, -1), F.log_softmax(second, -1)
        kl_12 = F.kl_div(p2, p1, log_target=True, reduction="sum")  # KL(p1 ‖ p2)
        kl_21 = F.kl_div(p1, p2, log_target=True, reduction="sum")
        return ce / 2 + alpha / 4 * (kl_12 + kl_21)  # the paper's CE + CE + α/2 (KL + KL), halved

    def ours(h, w, t):
        return rdrop_loss_sum(h, w, t, label_smoothing=label_smoothing, alpha=alpha, chunk=chunk)

    expected = loss_and_gradients(reference, hidden, weight, targets, scale=0.25)
    got = loss_and_gradients(ours, hidden, weight, targets, scale=0.25)
    for ours_value, theirs in zip(got, expected, strict=True):
        torch.testing.assert_close(ours_value, theirs, atol=1e-5, rtol=1e-5)


def test_rdrop_loss_of_two_equal_passes_is_plain_cross_entropy():
    # No dropout: both passes agree, the KL terms vanish, and loss and gradients are the
    # label-smoothed cross-entropy of one pass.
    hidden, weight, targets = inputs(11)
    twice = torch.cat([hidden, hidden]).detach().requires_grad_()

    def plain(h, w, t):
        return F.cross_entropy(h @ w.t(), t, label_smoothing=0.1, reduction="sum")

    loss, grad_hidden, grad_weight = loss_and_gradients(plain, hidden, weight, targets, scale=1)
    weight.grad = None
    got = rdrop_loss_sum(twice, weight, targets, label_smoothing=0.1, alpha=5.0)
    got.backward()
    torch.testing.assert_close(got.detach(), loss, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(twice.grad[:11] + twice.grad[11:], grad_hidden)
    torch.testing.assert_close(weight.grad, grad_weight)


def test_rdrop_loss_needs_two_rows_per_target():
    hidden, weight, targets = inputs(7)
    with pytest.raises(ValueError, match="hidden has 7 rows; R-Drop needs two per target"):
        rdrop_loss_sum(hidden, weight, targets, label_smoothing=0.0, alpha=1.0)


def test_rdrop_loss_under_bf16_autocast_is_close_and_keeps_float32_gradients():
    hidden, weight, targets = inputs(2 * 20)
    targets = targets[:20]

    def ours(h, w, t):
        return rdrop_loss_sum(h, w, t, label_smoothing=0.1, alpha=5.0, chunk=8)

    expected = loss_and_gradients(ours, hidden, weight, targets, 1.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = loss_and_gradients(ours, hidden, weight, targets, 1.0)
    assert got[0].dtype == got[1].dtype == got[2].dtype == torch.float32
    torch.testing.assert_close(got[0], expected[0], rtol=2e-2, atol=0.0)
    for ours_value, theirs in zip(got[1:], expected[1:], strict=True):  # bf16 logits' rounding
        error = torch.linalg.vector_norm(ours_value - theirs)  # enters the KL term's gradient
        assert error < 0.02 * torch.linalg.vector_norm(theirs)

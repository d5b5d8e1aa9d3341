"""The training loss: the chunked projection + cross-entropy against F.cross_entropy on the
full logits, values and both gradients."""

import pytest
import torch
import torch.nn.functional as F

from tfm.training.loss import projected_loss_sum, softmax_gradient, token_loss_sum

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
def test_the_softmax_gradient_is_cross_entropys_gradient_in_float32_from_any_logits(
    label_smoothing,
):
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(9, V, generator=generator) * 3
    targets = torch.randint(0, V, (9,), generator=generator)
    for given in (logits, logits.bfloat16()):  # bf16: what a bf16 matrix product gives
        exact = given.float().requires_grad_()
        expected = F.cross_entropy(exact, targets, label_smoothing=label_smoothing, reduction="sum")
        expected.backward()
        loss, grad = softmax_gradient(given, targets, label_smoothing)
        assert loss.dtype == torch.float32 and grad.dtype == given.dtype
        torch.testing.assert_close(loss, expected.detach())
        torch.testing.assert_close(grad, exact.grad.to(given.dtype))


def compiled_and_eager(device: str, n: int = 300, vocab: int = 1000):
    """The fused loss and both gradients under bf16 autocast, the softmax compiled and not."""
    generator = torch.Generator().manual_seed(2)
    hidden = torch.randn(n, 64, generator=generator).to(device).requires_grad_()
    weight = (torch.randn(vocab, 64, generator=generator) / 8).to(device).requires_grad_()
    targets = torch.randint(0, vocab, (n,), generator=generator).to(device)
    results = []
    for compiled in (True, False):
        hidden.grad = weight.grad = None
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = projected_loss_sum(
                hidden, weight, targets, label_smoothing=0.1, chunk=128, compiled=compiled
            )
        loss.backward()
        results.append((loss.detach(), hidden.grad.clone(), weight.grad.clone()))
    return results


@pytest.mark.slow  # torch.compile on the CPU: tens of seconds
def test_the_compiled_softmax_computes_what_the_eager_one_does_on_the_cpu():
    compiled, eager = compiled_and_eager("cpu")
    torch.testing.assert_close(compiled[0], eager[0], rtol=1e-5, atol=0.0)
    for ours, theirs in zip(compiled[1:], eager[1:], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=2e-2, atol=1e-3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_compiled_softmax_computes_what_the_eager_one_does_on_cuda():
    compiled, eager = compiled_and_eager("cuda")
    torch.testing.assert_close(compiled[0], eager[0], rtol=1e-5, atol=0.0)
    for ours, theirs in zip(compiled[1:], eager[1:], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=2e-2, atol=1e-3)

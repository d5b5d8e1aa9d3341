"""On a CUDA GPU the model, the fused loss, the fused attention kernels and decoding compute
what they compute on the CPU. Skipped without a GPU (CI has none); on a GPU machine run
`python -m pytest -q -k cuda`."""

import copy

import pytest
import torch
from tiny_models import copy_batch, lively_model, padded_batch, search_options, train_copy_model

from tfm.device import select_device
from tfm.training.loss import projected_loss_sum
from tfm.transformer import (
    ModelArgs,
    beam_search,
    build_model,
    greedy_decode,
    scaled_dot_product_attention,
)

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("full_float32"),
]

CUDA = torch.device("cuda")
OPTIONS = search_options(1.0, 5)


def test_forward_and_gradients_on_cuda_match_the_cpu():
    model = lively_model().train()  # dropout 0: training mode computes what eval mode does
    src = padded_batch([9, 3, 6, 1], vocab_size=16, seed=1)
    tgt = padded_batch([5, 8, 2, 4], vocab_size=16, seed=2)
    weights = torch.randn(4, tgt.size(1), 16, generator=torch.Generator().manual_seed(3))
    results = []
    for device in ("cpu", "cuda"):
        ours = copy.deepcopy(model).to(device)
        logits = ours(src.to(device), tgt.to(device))
        (logits * weights.to(device)).sum().backward()
        grads = [p.grad.cpu() for p in ours.parameters()]
        results.append((logits.detach().cpu(), grads))
    (cpu_logits, cpu_grads), (cuda_logits, cuda_grads) = results
    assert torch.allclose(cuda_logits, cpu_logits, atol=1e-4, rtol=1e-4)
    for cpu_grad, cuda_grad in zip(cpu_grads, cuda_grads, strict=True):
        assert torch.allclose(cuda_grad, cpu_grad, atol=1e-3, rtol=1e-3)


def loss_inputs(device: str, n: int = 300, V: int = 1000, D: int = 64):
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(n, D, generator=generator).to(device).requires_grad_()
    weight = (torch.randn(V, D, generator=generator) / D**0.5).to(device).requires_grad_()
    targets = torch.randint(0, V, (n,), generator=generator).to(device)
    return hidden, weight, targets


def test_fused_loss_on_cuda_matches_the_cpu_and_keeps_float32_gradients_under_bf16():
    def run(device: str, bf16: bool = False):
        hidden, weight, targets = loss_inputs(device)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            total = projected_loss_sum(hidden, weight, targets, label_smoothing=0.1, chunk=64)
        (total / 300).backward()
        return total.detach().cpu(), hidden.grad, weight.grad

    cpu, cuda, cuda_bf16 = run("cpu"), run("cuda"), run("cuda", bf16=True)
    assert torch.allclose(cuda[0], cpu[0], rtol=1e-5)
    for got, expected in zip(cuda[1:], cpu[1:], strict=True):
        assert torch.allclose(got.cpu(), expected, atol=1e-5, rtol=1e-4)
    assert torch.allclose(cuda_bf16[0], cpu[0], rtol=2e-2)
    for got, expected in zip(cuda_bf16[1:], cpu[1:], strict=True):
        assert got.dtype == torch.float32
        assert (got.cpu() - expected).norm() <= 0.02 * expected.norm()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_attention_kernels_match_the_explicit_path(dtype, causal):
    # Without weights, attention goes through F.scaled_dot_product_attention, whose CUDA kernels
    # (flash, memory-efficient) are picked by dtype and mask; with weights, through
    # matmul/softmax/matmul. A padded batch, keys masked per sentence.
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 4, 7, 32, generator=generator) for _ in range(3))
    q, k, v = (t.to(CUDA, dtype) for t in (q, k, v))
    lengths = torch.tensor([7, 4, 1], device=CUDA)
    mask = (torch.arange(7, device=CUDA)[None, :] < lengths[:, None])[:, None, None, :]
    fused, _ = scaled_dot_product_attention(q, k, v, mask=mask, is_causal=causal)
    explicit, weights = scaled_dot_product_attention(
        q, k, v, mask=mask, is_causal=causal, need_weights=True
    )
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    assert fused.dtype == dtype
    assert torch.allclose(fused.float(), explicit.float(), atol=tolerance, rtol=tolerance)
    assert torch.allclose(weights.float().sum(-1), torch.ones(3, 4, 7, device=CUDA), atol=1e-2)


def test_greedy_and_beam_search_on_cuda_give_the_cpu_outputs():
    model = train_copy_model()
    src, _ = copy_batch(16, torch.Generator().manual_seed(1))
    cuda_model = copy.deepcopy(model).to(CUDA)
    greedy = greedy_decode(model, src, **OPTIONS).tokens
    assert greedy_decode(cuda_model, src.to(CUDA), **OPTIONS).tokens == greedy
    beams = beam_search(model, src, beam_size=4, n_best=2, length_penalty=0.6, **OPTIONS)
    cuda_beams = beam_search(
        cuda_model, src.to(CUDA), beam_size=4, n_best=2, length_penalty=0.6, **OPTIONS
    )
    assert [[h.tokens for h in hyps] for hyps in cuda_beams] == [
        [h.tokens for h in hyps] for hyps in beams
    ]
    for hyps, cuda_hyps in zip(beams, cuda_beams, strict=True):
        for h, cuda_h in zip(hyps, cuda_hyps, strict=True):
            assert cuda_h.score == pytest.approx(h.score, abs=1e-4)


def test_attention_on_the_device_tfm_selects_stays_off_cudnn_whose_plans_are_built_per_shape():
    from torch.profiler import ProfilerActivity, profile

    select_device("cuda")
    torch.manual_seed(0)
    model = build_model(ModelArgs(
        src_vocab_size=64, tgt_vocab_size=64, d_model=64, n_heads=2, n_encoder_layers=1,
        n_decoder_layers=1, d_ff=128, dropout=0.0, max_len=64,
    )).to(CUDA)  # fmt: skip
    src = padded_batch([9, 3, 6, 1], vocab_size=64, seed=1).to(CUDA)
    tgt = padded_batch([5, 8, 2, 4], vocab_size=64, seed=2).to(CUDA)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with torch.autocast("cuda", dtype=torch.bfloat16):  # where cuDNN's kernel is eligible
            model(src, tgt).float().sum().backward()
        torch.cuda.synchronize()
    kernels = [event.key.lower() for event in prof.key_averages()]
    assert not [k for k in kernels if "cudnn" in k and "sdpa" in k]
    assert [k for k in kernels if ("fmha" in k or "flash" in k) and "cudnn" not in k]

"""Packed batches on a CUDA GPU: the variable-length kernels compute what the padded batch
computes on the CPU, and in bf16 every attention of a packed training step runs on flash
attention, which a padded batch's masks keep it from. Skipped without a GPU."""

import copy

import pytest
import torch
from tiny_models import padded_batch
from torch.nn.attention import SDPBackend, sdpa_kernel

from tfm.transformer import ModelArgs, PackedBatch, Packing, build_model

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("full_float32"),
]

CUDA = torch.device("cuda")
V = 64


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    args = ModelArgs(
        src_vocab_size=V, tgt_vocab_size=V, d_model=64, n_heads=2, n_encoder_layers=2,
        n_decoder_layers=2, d_ff=128, dropout=0.0, max_len=64,
    )  # fmt: skip
    return build_model(args).train()  # dropout 0: training mode computes what eval mode does


def batch():
    src = padded_batch([9, 3, 6, 1, 12], vocab_size=V, seed=1)
    tgt = padded_batch([6, 9, 3, 5, 2], vocab_size=V, seed=2)
    return src, tgt[:, :-1], tgt[:, 1:]


def padded_step(model, src, tgt_in, tgt_out):
    """The decoder's outputs at the real target positions (N, D), and the parameters' gradients
    of a weighted sum of them."""
    real = tgt_out != 0
    hidden = model(src, tgt_in, project=False).flatten(0, 1)[real.flatten().to(src.device)]
    return hidden, _gradients(model, hidden)


def packed_step(model, src, tgt_in, tgt_out):
    src_real, tgt_real = src != 0, tgt_out != 0
    packed = PackedBatch(Packing.of(src_real), Packing.of(tgt_real)).to(CUDA)
    src_ids, tgt_ids = src[src_real][None].to(CUDA), tgt_in[tgt_real][None].to(CUDA)
    hidden = model(src_ids, tgt_ids, packed=packed, project=False)  # (N, D)
    return hidden, _gradients(model, hidden)


def _gradients(model, hidden):
    weights = torch.randn(hidden.shape, generator=torch.Generator().manual_seed(3))
    model.zero_grad(set_to_none=True)
    (hidden.float() * weights.to(hidden.device)).sum().backward()
    return [p.grad.float().cpu() for p in model.parameters()]


def test_packed_float32_on_cuda_gives_the_padded_batchs_outputs_and_gradients_on_the_cpu(model):
    cpu_hidden, cpu_grads = padded_step(copy.deepcopy(model), *batch())
    hidden, grads = packed_step(copy.deepcopy(model).to(CUDA), *batch())
    torch.testing.assert_close(hidden.detach().cpu(), cpu_hidden.detach(), atol=1e-4, rtol=1e-4)
    for grad, cpu_grad in zip(grads, cpu_grads, strict=True):
        torch.testing.assert_close(grad, cpu_grad, atol=1e-3, rtol=1e-3)


def test_packed_bf16_on_cuda_runs_on_flash_attention_and_stays_close_to_padded(model):
    cuda_model = copy.deepcopy(model).to(CUDA)
    src, tgt_in, tgt_out = batch()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        padded_hidden, padded_grads = padded_step(
            cuda_model, src.to(CUDA), tgt_in.to(CUDA), tgt_out
        )
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):  # flash or nothing
            hidden, grads = packed_step(cuda_model, src, tgt_in, tgt_out)
            with pytest.raises(RuntimeError):  # masked attention cannot run on flash
                padded_step(cuda_model, src.to(CUDA), tgt_in.to(CUDA), tgt_out)
    assert (hidden.float() - padded_hidden.float()).norm() <= 0.02 * padded_hidden.float().norm()
    for grad, padded_grad in zip(grads, padded_grads, strict=True):
        assert (grad - padded_grad).norm() <= 0.03 * padded_grad.norm() + 1e-6

"""How busy training keeps the hardware: the model's FLOPs per step, from its shape alone, and the
share of the device's peak they reach (model FLOPs utilisation, MFU).

A step's FLOPs are those of its matrix products, counted as `torch.utils.flop_counter` counts
them (2 per multiply-add; elementwise work, softmax and the optimizer not counted): for each
batch of B sentences padded to S source and T target positions, with N real target tokens,

    encoder layer   8·B·S·D² (q, k, v, o)  + 4·B·S²·D (scores, values)  + 4·B·S·D·F (feed-forward)
    decoder layer   8·B·T·D² + 4·B·T²·D (self-attention; all T² scores, the causal mask saves none)
                    4·B·T·D² + 4·B·S·D² + 4·B·T·S·D (cross-attention: q, o on T; k, v on S)
                    4·B·T·D·F
    output          2·N·D·V (only the real target positions are projected)

forward; the backward pass costs twice the forward (the gradients of both operands), so a step is
3 × the forward. Padding positions are counted: the step computes them; a packed batch
(`train.layout: packed`) has none, and its attention scores are each sentence's own.

Peaks are the vendors' dense (no sparsity) figures; float32 is the plain FP32 rate, as tfm
leaves TF32 off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tfm.data.batching import Batch
from tfm.data.tokenizer import PAD_ID
from tfm.transformer import ModelArgs


def forward_flops(args: ModelArgs, *, sentences: int, src_len: int, tgt_len: int, kept: int) -> int:
    """Matrix-product FLOPs of one forward pass over a padded (sentences, src_len, tgt_len)
    batch that projects `kept` target positions onto the vocabulary (see the module docstring)."""
    B, S, T = sentences, src_len, tgt_len
    return _forward_flops(args, src=B * S, src_sq=B * S * S, tgt=B * T, tgt_sq=B * T * T,
                          src_tgt=B * S * T, kept=kept)  # fmt: skip


def packed_forward_flops(
    args: ModelArgs, src_lengths: Sequence[int], tgt_lengths: Sequence[int]
) -> int:
    """The same for a packed batch (`train.layout: packed`) of sentences with these real
    source and target lengths: its products cover the real tokens only, each sentence's
    attention its own S_b² (T_b², T_b·S_b) scores."""
    pairs = list(zip(src_lengths, tgt_lengths, strict=True))
    return _forward_flops(
        args,
        src=sum(s for s, _ in pairs),
        src_sq=sum(s * s for s, _ in pairs),
        tgt=sum(t for _, t in pairs),
        tgt_sq=sum(t * t for _, t in pairs),
        src_tgt=sum(s * t for s, t in pairs),
        kept=sum(t for _, t in pairs),
    )


def _forward_flops(
    args: ModelArgs, *, src: int, src_sq: int, tgt: int, tgt_sq: int, src_tgt: int, kept: int
) -> int:
    """The module docstring's sums, from the positions of each side (src = B·S), the attention
    scores (src_sq = B·S², tgt_sq = B·T², src_tgt = B·T·S) and the projected positions."""
    D, F = args.d_model, args.d_ff
    encoder = 8 * src * D * D + 4 * src_sq * D + 4 * src * D * F
    self_attention = 8 * tgt * D * D + 4 * tgt_sq * D
    cross_attention = 4 * tgt * D * D + 4 * src * D * D + 4 * src_tgt * D
    decoder = self_attention + cross_attention + 4 * tgt * D * F
    output = 2 * kept * D * args.tgt_vocab_size
    return args.n_encoder_layers * encoder + args.n_decoder_layers * decoder + output


def step_flops(args: ModelArgs, batches: Sequence[Batch], *, packed: bool = False) -> int:
    """Matrix-product FLOPs of a training step (forward and backward) over `batches`, padded
    or, with `packed`, packed (`train.layout`)."""
    return sum(3 * batch_forward_flops(args, b, packed=packed) for b in batches)


def batch_forward_flops(args: ModelArgs, batch: Batch, *, packed: bool = False) -> int:
    if packed:
        src_lengths = (batch.src != PAD_ID).sum(dim=1).tolist()
        tgt_lengths = (batch.tgt_out != PAD_ID).sum(dim=1).tolist()
        return packed_forward_flops(args, src_lengths, tgt_lengths)
    B, S = batch.src.shape
    T = batch.tgt_in.size(1)
    return forward_flops(args, sentences=B, src_len=S, tgt_len=T, kept=batch.n_tgt_tokens)


def flops_per_token(args: ModelArgs, *, length: int) -> float:
    """Training FLOPs per target token for sentences of `length` tokens on both sides, unpadded."""
    return (
        3 * forward_flops(args, sentences=1, src_len=length, tgt_len=length, kept=length) / length
    )


@dataclass(frozen=True)
class Peak:
    """A device's dense peak arithmetic rates in TFLOP/s, and where they come from."""

    name: str
    bf16: float
    fp32: float
    source: str

    def tflops(self, dtype: torch.dtype) -> float:
        return self.bf16 if dtype == torch.bfloat16 else self.fp32


# Matched against torch.cuda.get_device_name in order (the first name it contains wins), so the
# PCIe and NVL variants come before the plain SXM name.
PEAKS = (
    Peak("H100 PCIe", 756.0, 51.2, "NVIDIA H100 Tensor Core GPU datasheet (PCIe)"),
    Peak("H100 NVL", 835.0, 60.0, "NVIDIA H100 Tensor Core GPU datasheet (NVL)"),
    Peak("H100", 989.4, 66.9, "NVIDIA H100 Tensor Core GPU datasheet (SXM)"),
    Peak("H200", 989.4, 66.9, "NVIDIA H200 Tensor Core GPU datasheet (SXM)"),
    Peak("A100", 312.0, 19.5, "NVIDIA A100 Tensor Core GPU datasheet"),
    Peak("L4", 121.0, 30.3, "NVIDIA L4 Tensor Core GPU datasheet"),
)


def known_peak(device_name: str) -> Peak | None:
    """The table's entry for a device of this name (as torch.cuda.get_device_name gives it)."""
    return next((p for p in PEAKS if p.name in device_name), None)


def device_peak(device: torch.device) -> Peak | None:
    """The peak of `device` when the table knows it (CUDA devices only: a CPU's depends on its
    cores and clock; bench/train_speed.py measures it)."""
    if device.type != "cuda":
        return None
    return known_peak(torch.cuda.get_device_name(device))


def utilisation(
    flops: int, seconds: float, device: torch.device, dtype: torch.dtype
) -> dict[str, float]:
    """A log line's fields: `model_tflops_per_s`, and `mfu`, its share of the device's peak in
    `dtype` where the table knows the device (4 significant digits each)."""
    if not flops or seconds <= 0:
        return {}
    rate = flops / seconds / 1e12
    fields = {"model_tflops_per_s": float(f"{rate:.4g}")}
    if (peak := device_peak(device)) is not None:
        fields["mfu"] = float(f"{rate / peak.tflops(dtype):.4g}")
    return fields


def describe(args: ModelArgs, device: torch.device, dtype: torch.dtype, *, length: int = 32) -> str:
    """The start log's line on model FLOPs and the peak they are measured against."""
    per_token = flops_per_token(args, length=length)
    text = f"model FLOPs: {per_token / 1e6:,.1f} MFLOP per target token of training"
    text += f" (sentences of {length} tokens; counted per step from its batch shapes)"
    peak = device_peak(device)
    precision = "bf16" if dtype == torch.bfloat16 else "fp32"
    if peak is None:
        return text + f"; the peak of this {device.type} device is not known: no MFU"
    return text + (
        f"; MFU against the {peak.name}'s dense {precision} peak, {peak.tflops(dtype):g} TFLOP/s "
        f"({peak.source})"
    )

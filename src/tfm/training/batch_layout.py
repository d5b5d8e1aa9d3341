"""How a training batch reaches the model (`train.layout`, `train.static_shapes`) and the summed
label-smoothed loss (§5.4) of its real target tokens.

The training step (`step.py`) and the plan's timing of a shape (`recipe/calibration.py`) both go
through `layout_loss_sum`, so that a shape is timed as it will train:

    loss = BatchLoss(device, dtype, model.output_projection.weight, label_smoothing=0.1)
    total = layout_loss_sum("packed", model, batch, loss)   # summed over the real tokens
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tfm.data.batching import Batch, pad_to_static_shape
from tfm.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from tfm.device import autocast
from tfm.training.loss import projected_loss_sum
from tfm.transformer import PackedBatch, Packing


@dataclass(frozen=True)
class BatchLoss:
    """What a batch's loss needs besides the model: the device the batch moves to, the autocast
    precision, the vocabulary projection's weight and ε_ls."""

    device: torch.device
    dtype: torch.dtype
    projection: torch.Tensor
    label_smoothing: float

    def autocast(self):
        return autocast(self.device, self.dtype)

    def of(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The summed loss of `hidden` (N, D) projected onto the vocabulary, against `targets`."""
        return projected_loss_sum(
            hidden, self.projection, targets, label_smoothing=self.label_smoothing
        )


def static(batch: Batch, *, max_tokens: int) -> Batch:
    """`batch` padded to one of a few fixed shapes (`train.static_shapes`)."""
    return pad_to_static_shape(
        batch, max_tokens=max_tokens, pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID
    )


def padded_loss_sum(module: torch.nn.Module, batch: Batch, loss: BatchLoss) -> torch.Tensor:
    """`train.layout: padded`. `batch` is in host memory, and which target positions are real
    is found there: found on a GPU, their count would make the host wait for it. The batch then
    moves to the device, and the model computes every position (static shapes stay static under
    torch.compile); only the real positions are projected onto the vocabulary."""
    real = batch.tgt_out != PAD_ID  # (B, T)
    positions = real.flatten().nonzero().squeeze(1)  # (N,) row-major indices of real positions
    device = loss.device
    targets = batch.tgt_out[real].to(device, non_blocking=True)  # (N,)
    positions = positions.to(device, non_blocking=True)
    batch = batch.to(device, non_blocking=True)
    with loss.autocast():
        hidden = module(batch.src, batch.tgt_in, project=False)  # (B, T, D)
        hidden = hidden.flatten(0, 1).index_select(0, positions)  # (N, D): padding gets no logits
        return loss.of(hidden, targets)


def packed_loss_sum(module: torch.nn.Module, batch: Batch, loss: BatchLoss) -> torch.Tensor:
    """`train.layout: packed`: only the real tokens reach the model, packed on the host (sources
    where they are not padding, targets where tgt_out is a real token) with their sizes, so
    that no kernel waits for the device to learn them (transformer/packing.py)."""
    src_real, tgt_real = batch.src != PAD_ID, batch.tgt_out != PAD_ID  # (B, S), (B, T)
    device = loss.device
    packed = PackedBatch(Packing.of(src_real), Packing.of(tgt_real)).to(device, non_blocking=True)
    src = batch.src[src_real][None].to(device, non_blocking=True)  # (1, M)
    tgt_in = batch.tgt_in[tgt_real][None].to(device, non_blocking=True)  # (1, N)
    targets = batch.tgt_out[tgt_real].to(device, non_blocking=True)  # (N,)
    with loss.autocast():
        hidden = module(src, tgt_in, packed=packed, project=False)  # (N, D)
        return loss.of(hidden, targets)


LAYOUTS = {"padded": padded_loss_sum, "packed": packed_loss_sum}


def layout_loss_sum(
    layout: str, module: torch.nn.Module, batch: Batch, loss: BatchLoss
) -> torch.Tensor:
    """The summed loss of `batch`'s real target tokens, the batch reaching `module` (the model as
    the step calls it: DDP-wrapped or compiled) as `layout` says."""
    return LAYOUTS[layout](module, batch, loss)

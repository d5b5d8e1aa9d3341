"""How much memory training a model takes, estimated before the model is built, and the check
that refuses a plan the machine cannot hold.

    estimate_training_bytes(args, max_tokens=4096)   # bytes, for a planner or a check
    estimate_training_memory(args, max_tokens=4096)  # the same, in its parts

The parts, all float32 (bf16 autocast keeps float32 weights and holds less):
- weights, gradients and AdamW's two moments: 16 bytes per parameter (tied weights once), counted
  exactly from the shape (`tfm.transformer.parameter_count`);
- activations kept for the backward pass of one batch of `max_tokens` source and as many target
  tokens (`train.max_tokens` bounds each side): per token and layer about 12·D + 2·F values in the
  encoder, 14·D + 2·F in the decoder plus 2·D of each source token for its cross-attention, 2·D
  for the embeddings; and the vocabulary projection fused with the loss, V values for each of
  its 1,024-row chunks three times (logits, probabilities, their gradient). Measured on a CPU
  (d_model 256 and 512, 8,192-token batches), these figures are 5-15% above the real peak.
Attention is computed by fused kernels that keep no (S, S) weights, so sentence length does not
enter. Python, torch itself and the data are not counted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from tfm.errors import UsageError
from tfm.transformer import ModelArgs, parameter_count

log = logging.getLogger(__name__)

BYTES_PER_VALUE = 4  # float32
STATE_BYTES_PER_PARAMETER = 4 * BYTES_PER_VALUE  # weight, gradient, AdamW's exp_avg, exp_avg_sq
LOSS_CHUNK_ROWS = 1024  # rows of the vocabulary projection at a time (tfm.training.loss)


@dataclass(frozen=True)
class TrainingMemory:
    """An estimate of training memory, in bytes: `state` (weights, gradients, optimizer) for
    `parameters` parameters, and `activations` of one batch."""

    parameters: int
    state: int
    activations: int

    @property
    def total(self) -> int:
        return self.state + self.activations


def estimate_training_memory(args: ModelArgs, max_tokens: int) -> TrainingMemory:
    """The parts of `estimate_training_bytes` (see the module docstring)."""
    d, f = args.d_model, args.d_ff
    per_src_token = args.n_encoder_layers * (12 * d + 2 * f) + args.n_decoder_layers * 2 * d + 2 * d
    per_tgt_token = args.n_decoder_layers * (14 * d + 2 * f) + 2 * d
    projection = 3 * min(max_tokens, LOSS_CHUNK_ROWS) * args.tgt_vocab_size
    values = max_tokens * (per_src_token + per_tgt_token) + projection
    parameters = parameter_count(args)
    return TrainingMemory(
        parameters=parameters,
        state=parameters * STATE_BYTES_PER_PARAMETER,
        activations=values * BYTES_PER_VALUE,
    )


def estimate_training_bytes(args: ModelArgs, max_tokens: int) -> int:
    """Bytes that training the model `args` describes takes with batches of `max_tokens` tokens
    (`train.max_tokens`): weights, gradients and AdamW state, and one batch's activations, in
    float32. An estimate a little above the real peak (see the module docstring); it allocates
    nothing and depends on nothing but its arguments."""
    return estimate_training_memory(args, max_tokens).total


def available_bytes(device: torch.device) -> int | None:
    """Memory this process could still allocate on `device`: a CUDA GPU's free memory, or on
    Linux the system's available memory (within a cgroup's limit); None where unknown."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type != "cpu":
        return None
    found = [_meminfo_available(), _cgroup_room()]
    known = [n for n in found if n is not None]
    return min(known) if known else None


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """What a cgroup v2 memory limit leaves, or None without one."""
    root = Path("/sys/fs/cgroup")
    try:
        limit = (root / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int((root / "memory.current").read_text())
    except (OSError, ValueError):
        return None


def check_fits(args: ModelArgs, max_tokens: int, device: torch.device) -> TrainingMemory:
    """Refuse (UsageError, one line with the figures) a model and batch size whose training
    cannot fit in the memory `device` has available; return the estimate."""
    estimate = estimate_training_memory(args, max_tokens)
    available = available_bytes(device)
    if available is not None and estimate.total > available:
        raise UsageError(
            f"training this model needs about {_gb(estimate.total)} of memory "
            f"({estimate.parameters:,} parameters: {_gb(estimate.state)} for weights, gradients "
            f"and AdamW state; activations of a train.max_tokens={max_tokens} batch: "
            f"{_gb(estimate.activations)}), but only {_gb(available)} is available on {device}; "
            "use a smaller model (model.d_model, model.d_ff, layers) or a smaller train.max_tokens"
        )
    return estimate


def _gb(n_bytes: int) -> str:
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e8 else f"{n_bytes / 1e6:.1f} MB"

"""Choosing the device and the numeric precision a run uses."""

from __future__ import annotations

import contextlib
import logging
import resource
import sys

import torch

from tfm.errors import UsageError

log = logging.getLogger(__name__)

DEVICE_NAMES = ("auto", "cpu", "cuda", "mps")


def check_device_name(name: str, *, option: str = "--device") -> str:
    """`name` if it is one of DEVICE_NAMES, else a UsageError naming `option` and what it got."""
    if name not in DEVICE_NAMES:
        *first, last = DEVICE_NAMES
        raise UsageError(f"{option} {name}: expected {', '.join(first)} or {last}")
    return name


def select_device(name: str) -> torch.device:
    """`auto` picks CUDA, then Apple MPS, then CPU; an absent explicit device is an error."""
    cuda = torch.cuda.is_available()
    mps = bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    if name == "auto":
        name = "cuda" if cuda else "mps" if mps else "cpu"
        log.info("device: %s (auto)", name)
    elif name == "cuda" and not cuda:
        raise UsageError(
            "device 'cuda' was asked for but no CUDA GPU is available to this torch "
            f"(torch {torch.__version__}); use --device cpu or --device auto"
        )
    elif name == "mps" and not mps:
        raise UsageError(
            "device 'mps' was asked for but Apple MPS is not available; use --device cpu"
        )
    if name == "cuda":
        without_cudnn_attention()
    return torch.device(name)


def without_cudnn_attention() -> None:
    """Keep `F.scaled_dot_product_attention` on CUDA off cuDNN's kernel (its flash and
    memory-efficient kernels remain). cuDNN builds a plan for each new shape, and batches of
    sentences come in many shapes: on an H100 (torch 2.11), bf16 training steps of first-seen
    shapes took 378 ms instead of 34 ms (the slowest 5 s). Process-wide; `tfm` owns its process."""
    torch.backends.cuda.enable_cudnn_sdp(False)


def resolve_precision(precision: str, device: torch.device) -> torch.dtype:
    """The precision decoding uses: `auto` is float32 on every device (decoding's bf16 outputs
    are not checked against float32's, and a decoding step is small); `bf16` turns it on."""
    if precision == "bf16":
        return torch.bfloat16
    return torch.float32


def training_precision(precision: str, device: torch.device) -> torch.dtype:
    """The precision training uses: `auto` is bf16 autocast on a CUDA device that supports it,
    where the paper's base model trained 3.07x as fast as in float32 on an H200 (bench/README.md),
    and float32 elsewhere: on the CPU, bf16 measured slower for tfm's models (0.93x on a 2-core
    AVX-512 BF16 CPU). A model small enough to be bound by kernel launches on a GPU (the 7.6M
    Multi30k model: bf16 0.71x float32 on an H200) is better off with `fp32` there."""
    if precision == "auto":
        return torch.bfloat16 if device.type == "cuda" and cuda_bf16_supported() else torch.float32
    return resolve_precision(precision, device)


def cuda_bf16_supported() -> bool:
    """Whether this process's CUDA device computes in bf16 natively (Ampere and later)."""
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)


def precision_name(dtype: torch.dtype) -> str:
    """`fp32` or `bf16`, as `train.precision` spells them."""
    return "bf16" if dtype == torch.bfloat16 else "fp32"


def autocast(device: torch.device, dtype: torch.dtype) -> contextlib.AbstractContextManager:
    """bf16 autocast for the forward pass, or nothing for float32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def peak_memory_mib(device: torch.device) -> float:
    """The most memory the run has held so far, in MiB: on CUDA the peak of torch's allocations
    on the GPU, elsewhere the process's peak resident set (ru_maxrss: KiB on Linux, bytes on
    macOS), which includes Python, torch and the data."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10

"""How to decode (`DecodeSettings`, resolved from a run's config) and what a user asked to decode
with (`DecodeRequest`: the options `tfm eval` and `tfm translate` share)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from tfm.config import DecodingConfig
from tfm.device import check_device_name
from tfm.prediction.ensemble import Ensemble
from tfm.transformer import Transformer

Model = Transformer | Ensemble  # one trained model, or several decoding as one


@dataclass(frozen=True)
class DecodeSettings:
    """How to decode: output limit a·S + b, batch size in source tokens, device and precision."""

    max_len_a: float = 1.5
    max_len_b: int = 10
    max_tokens: int = 8000
    device: torch.device = torch.device("cpu")
    dtype: torch.dtype = torch.float32
    beam_size: int = 1  # 1: greedy search
    length_penalty: float = 0.6  # GNMT alpha, for beam search

    @classmethod
    def from_config(
        cls,
        config: DecodingConfig,
        device: torch.device,
        dtype: torch.dtype,
        *,
        beam_size: int | None = None,
        length_penalty: float | None = None,
    ) -> DecodeSettings:
        """The config's settings; `beam_size` and `length_penalty` override it when given."""
        return cls(
            config.max_len_a,
            config.max_len_b,
            config.max_tokens,
            device,
            dtype,
            beam_size=beam_size or config.beam_size,
            length_penalty=config.length_penalty if length_penalty is None else length_penalty,
        )


@dataclass(frozen=True, kw_only=True)
class DecodeRequest:
    """What to decode with, as the user asked: the run (None: the run last trained from the
    working directory), the device name, beam size and length penalty (None: the run's config
    decides), more runs to decode with as one ensemble, reverse-direction runs to rerank the beam
    with, the reranking weight (None: 1) and the CPU threads (None: `tfm.threads` picks)."""

    run: str | Path | None = None
    device: str | None = None
    beam_size: int | None = None
    length_penalty: float | None = None
    ensemble: Sequence[str | Path] = ()
    rerank_with: Sequence[str | Path] = ()
    rerank_weight: float | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.device is not None:
            check_device_name(self.device)
        object.__setattr__(self, "ensemble", tuple(self.ensemble or ()))
        object.__setattr__(self, "rerank_with", tuple(self.rerank_with or ()))

"""How to decode (`DecodeSettings`, resolved from a run's config) and what a user asked to decode
with (`DecodeRequest`: the options `tfm eval` and `tfm translate` share).

Neither imports torch: a translator over a CTranslate2 export uses them too, and a process that
only translates with an export never loads torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tfm.config import DecodingConfig, planned

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DecodeSettings:
    """How to decode: output limit a·S + b, batch size in source tokens, the device ("cpu",
    "cuda", "cuda:1", "mps") and the autocast precision (a torch dtype's name), the beam size
    (1: greedy search) and the GNMT length penalty alpha of beam search. A torch device or
    dtype given is kept as its name."""

    max_len_a: float = 1.5
    max_len_b: int = 10
    max_tokens: int = 8000
    device: str = "cpu"
    dtype: str = "float32"
    beam_size: int = 1
    length_penalty: float = 0.6

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", str(self.device))
        object.__setattr__(self, "dtype", str(self.dtype).removeprefix("torch."))

    @classmethod
    def from_config(
        cls,
        config: DecodingConfig,
        device: torch.device | str,
        dtype: torch.dtype | str,
        *,
        beam_size: int | None = None,
        length_penalty: float | None = None,
        min_beam: int = 1,
    ) -> DecodeSettings:
        """The config's settings; `beam_size` and `length_penalty` override it when given.
        Without a beam size, the config's but at least `min_beam`: the one rule for the beam
        every decoding command uses."""
        return cls(
            config.max_len_a,
            config.max_len_b,
            config.max_tokens,
            str(device),
            str(dtype),
            beam_size=beam_size or max(planned(config.beam_size, "decoding.beam_size"), min_beam),
            length_penalty=config.length_penalty if length_penalty is None else length_penalty,
        )

    def torch_device(self) -> torch.device:
        import torch

        return torch.device(self.device)

    def torch_dtype(self) -> torch.dtype:
        import torch

        dtype = getattr(torch, self.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"dtype={self.dtype!r} is not a torch dtype")
        return dtype


@dataclass(frozen=True, kw_only=True)
class DecodeRequest:
    """What to decode with, as the user asked: the run (a run directory or an exported folder;
    None: the run last trained from the working directory), the model file of the run to use
    instead of best.pt (`checkpoint`), the device name, beam size and length penalty (None: the
    run's config decides), more runs to decode with as one ensemble, reverse-direction runs to
    rerank the beam with, the reranking weight (None: 1) and the CPU threads (None: `tfm.threads`
    picks)."""

    run: str | Path | None = None
    checkpoint: str | Path | None = None
    device: str | None = None
    beam_size: int | None = None
    length_penalty: float | None = None
    ensemble: Sequence[str | Path] = ()
    rerank_with: Sequence[str | Path] = ()
    rerank_weight: float | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.device is not None:
            from tfm.device import check_device_name

            check_device_name(self.device)
        object.__setattr__(self, "ensemble", tuple(self.ensemble or ()))
        object.__setattr__(self, "rerank_with", tuple(self.rerank_with or ()))

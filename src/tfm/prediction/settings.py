"""How to decode (`DecodeSettings`: a strategy, the output limit, the batch size, device and
precision, resolved from a run's config and what the user asked) and what a user asked to decode
with (`DecodeRequest`: the options `tfm eval`, `tfm translate`, `tfm rerank-sweep` and
`tfm serve` share, built from a command's options by one function).

Neither imports torch: a translator over a CTranslate2 export uses them too, and a process that
only translates with an export never loads torch.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfm.config import DataConfig, DecodingConfig
from tfm.decoding_options import SEARCH_KEYS, option_name
from tfm.prediction.strategies import Spelling, Strategy, checked, strategy_for

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class OutputLimit:
    """tfm's rule for a sentence's output length: floor(a · S + b) tokens, EOS included, S the
    source's tokens (EOS included), at least 1 and at most the model's positional table (the
    config's `decoding.max_len_a` and `decoding.max_len_b`)."""

    a: float
    b: int

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError(f"max_len_a={self.a} must not be negative")

    def tokens(self, source_length: int, max_len: int) -> int:
        return min(max(math.floor(self.a * source_length + self.b), 1), max_len)


@dataclass(frozen=True, kw_only=True)
class DecodeSettings:
    """How to decode: the strategy, the output limit, the batch size in source tokens, the
    device ("cpu", "cuda", "cuda:1", "mps") and the autocast precision (a torch dtype's name).
    A torch device or dtype given is kept as its name. `tgt_lang`: the language translated
    into (None: the run's main pair's target), and `tag` the tag put before every source to ask
    for it (`<2pt>`: a model trained into several languages; None for a model of one)."""

    strategy: Strategy
    limit: OutputLimit
    max_tokens: int
    device: str = "cpu"
    dtype: str = "float32"
    tgt_lang: str | None = None
    tag: str | None = None

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
        asked: Mapping[str, Any] | None = None,
        n_best: int = 1,
        spell: Spelling = option_name,
    ) -> DecodeSettings:
        """The config's settings, with the strategy the user `asked` for over the config's
        (`tfm.prediction.strategies.strategy_for`: the one rule for every decoding command)."""
        strategy = strategy_for(config, asked or {}, n_best=n_best, spell=spell)
        limit = OutputLimit(config.max_len_a, config.max_len_b)
        return cls(strategy=strategy, limit=limit, max_tokens=config.max_tokens,
                   device=str(device), dtype=str(dtype))  # fmt: skip

    def asking(
        self,
        config: DecodingConfig,
        asked: Mapping[str, Any],
        *,
        n_best: int = 1,
        spell: Spelling = option_name,
    ) -> DecodeSettings:
        """These settings with the strategy the user `asked` for over these settings' own (and,
        for another strategy's settings, `config`'s): a server request over the server's."""
        ours = config.model_copy(update=self.strategy.describe())
        strategy = strategy_for(ours, asked, n_best=n_best, spell=spell)
        return dataclasses.replace(self, strategy=strategy)

    def into(
        self,
        data: DataConfig,
        tgt_lang: str | None,
        *,
        option: str = "--tgt-lang",
        trained: tuple[str, ...] | None = None,
    ) -> DecodeSettings:
        """These settings translating into `tgt_lang` (None: the main pair's target) with a
        model of `data`; UsageError naming `option` where it was not trained to (`trained`: the
        languages its training read, where known)."""
        tag = data.target_tag(tgt_lang, option=option, trained=trained)
        return dataclasses.replace(self, tgt_lang=tgt_lang or data.tgt_lang, tag=tag)

    def batch_source_tokens(self, n_best: int = 1) -> int:
        """The source tokens of one decoding batch: a source takes one decoder row per
        hypothesis, so that a batch's rows stay near `max_tokens`."""
        return max(self.max_tokens // self.strategy.hypotheses(n_best), 1)

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
    instead of best.pt (`checkpoint`), the device name, the strategy and its settings (`search`:
    decoding config keys; one not given: the run's config decides), the most hypotheses a call
    will ask for (`n_best`), more runs to decode with as one ensemble, reverse-direction runs to
    rerank the beam with, the reranking weight (None: 1) and the CPU threads (None:
    `tfm.threads` picks)."""

    run: str | Path | None = None
    checkpoint: str | Path | None = None
    device: str | None = None
    search: Mapping[str, Any] = field(default_factory=dict)
    n_best: int = 1
    ensemble: Sequence[str | Path] = ()
    rerank_with: Sequence[str | Path] = ()
    rerank_weight: float | None = None
    threads: int | None = None
    tgt_lang: str | None = None

    def __post_init__(self) -> None:
        if self.device is not None:
            from tfm.device import check_device_name

            check_device_name(self.device)
        object.__setattr__(self, "ensemble", tuple(self.ensemble or ()))
        object.__setattr__(self, "rerank_with", tuple(self.rerank_with or ()))
        object.__setattr__(self, "search", checked(self.search))  # before a run is opened

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> DecodeRequest:
        """The request a command's options make, by name (None: not given): those this class
        has, and the decoding keys (`SEARCH_KEYS`) as `search`; the command's others are not
        the request's."""
        own = {f.name for f in dataclasses.fields(cls)} - {"search"}
        return cls(
            **{key: value for key, value in options.items() if key in own and value is not None},
            search={key: value for key, value in options.items() if key in SEARCH_KEYS},
        )


def trained_languages(plan_file: Path) -> tuple[str, ...] | None:
    """The target languages a run's training read, from the mix its plan.json keeps (a related
    corpus left out is not among them); None where the file keeps no mix."""
    try:
        mix = json.loads(plan_file.read_text(encoding="utf-8")).get("mix")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(mix, dict):
        return None
    read = [c["tgt_lang"] for c in mix.get("corpora", []) if c.get("times")]
    return tuple(dict.fromkeys(read)) or None

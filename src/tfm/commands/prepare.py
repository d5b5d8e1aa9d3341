"""`tfm data prepare`: the training split tokenized into the data cache ahead of training."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tfm.config import load_config
from tfm.data.cache.prepared_cache import prepared_entry


def prepare_corpus(config: Path, *, overrides: Sequence[str] = ()) -> Path:
    """The cache entry's folder of the training split and tokenizer settings the YAML file
    `config` (with `section.key=value` overrides) names, prepared first unless it exists."""
    return prepared_entry(load_config(config, list(overrides))).path

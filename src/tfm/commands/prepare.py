"""`tfm data prepare`: the training split tokenized into the data cache ahead of training."""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from pathlib import Path

from tfm.config import load_config
from tfm.data.cache.prepared_cache import prepared_entry


def prepare_corpus(config: Path, *, overrides: Sequence[str] = ()) -> Path:
    """The cache entry's folder of the training split and tokenizer settings the YAML file
    `config` (with `section.key=value` overrides) names, prepared first unless it exists.

    SIGINT stops preparation (KeyboardInterrupt, exit 130) even when the process was started
    with SIGINT ignored, as a shell starts background jobs and as `tfm train` also does."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return prepared_entry(load_config(config, list(overrides))).path

"""What training logs before its first step, so that a log says what was trained and on what:
the configuration's differences from the defaults, one `key: value` line each (`tfm config show`
prints every key), and the first training pair as the model sees it, in subword pieces.
"""

from __future__ import annotations

import logging

from tfm.config import Config
from tfm.config.show import changed_keys
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)

MAX_PIECES = 40  # of a long sentence, the first ones


def log_start(config: Config, train_split: EncodedSplit, tokenizer: Tokenizer) -> None:
    """Log the configuration's changes and the first training pair (see the module docstring)."""
    changes = changed_keys(config)
    lines = [f"  {key}: {value}" for key, value in changes] or ["  (none)"]
    log.info("config, where it differs from the defaults:\n%s", "\n".join(lines))
    if len(train_split):
        src = _pieces(tokenizer.src_pieces([int(i) for i in train_split.src[0]]))
        tgt = _pieces(tokenizer.tgt_pieces([int(i) for i in train_split.tgt[0]]))
        log.info("first training pair in subword pieces:\n  src: %s\n  tgt: %s", src, tgt)


def _pieces(pieces: list[str]) -> str:
    shown = " ".join(pieces[:MAX_PIECES])
    more = len(pieces) - MAX_PIECES
    return f"{shown} … ({more} more)" if more > 0 else shown

"""Quieting loggers for a while: around work whose warnings are said elsewhere, or would be
said more than once."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def quieted(*names: str, when: bool = True) -> Iterator[None]:
    """Only errors from the loggers `names` (and their children) while inside, when `when`;
    their levels as they were after."""
    loggers = [logging.getLogger(name) for name in names] if when else []
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)

"""Where the data cache lives: `data.cache_dir`, or `.tfm-cache` beside the run directory, and
the scratch folder in it where one process writes an entry before renaming it into place."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from tfm.config import Config
from tfm.errors import DataError


def cache_root(config: Config) -> Path:
    """`data.cache_dir`, or `.tfm-cache` beside the run directory (shared by runs next to it)."""
    if config.data.cache_dir is not None:
        return Path(config.data.cache_dir)
    return Path(config.run_dir).parent / ".tfm-cache"


def scratch_folder(root: Path, prefix: str) -> Path:
    """`root` made (a DataError where it cannot be), and in it the path of this thread's scratch
    folder, `<prefix>-<pid>-<thread>`, emptied of what a failed attempt left (not made)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"data.cache_dir {root}: cannot write there ({exc.strerror})") from None
    folder = root / f"{prefix}-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(folder, ignore_errors=True)
    return folder

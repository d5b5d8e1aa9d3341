"""Crash-safe file writes: a file holds its old content or its new content, never half of one.

Writes go to a temporary file in the same folder, are fsynced and then renamed over the target,
and the folder is fsynced so that the rename itself survives a crash; a crash, SIGKILL or full
disk leaves either the old file or the new one. Temporary files are named `.NAME.tmp-PID-HEX`.
"""

import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO

import torch

from tfm.errors import CheckpointError
from tfm.rundir.failure import brief_error

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]


def _atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "xb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt and friends keep their meaning
        raise CheckpointError(
            f"cannot write {path} ({brief_error(exc)}); the previous file, if any, is unchanged"
        ) from exc
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; some platforms cannot open a folder, which is harmless."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        logger.warning("could not fsync folder %s after writing: %s", directory, exc)
    finally:
        os.close(fd)


def atomic_save(obj: object, path: PathLike) -> None:
    """`torch.save` obj to path so that path holds the old or the new content even after a crash."""
    _atomic_write(Path(path), lambda file: torch.save(obj, file))


def atomic_write_text(text: str, path: PathLike) -> None:
    """Write a small UTF-8 text file (JSON, YAML) with the same crash safety as `atomic_save`."""
    _atomic_write(Path(path), lambda file: file.write(text.encode("utf-8")))

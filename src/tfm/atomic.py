"""Crash-safe file writes: a file holds its old content or its new content, never half of one.

Writes go to a temporary file in the same folder, are fsynced and then renamed over the target,
and the folder is fsynced so that the rename itself survives a crash; a crash, SIGKILL or full
disk leaves either the old file or the new one. Temporary files are named `.NAME.tmp-PID-HEX`; a
SIGKILL can leave one behind, which `remove_temp_files` deletes when the next run starts. A full
disk is a `DiskFullError` naming the file and the space left.
"""

import logging
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tfm.failure import write_failure

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

_TEMP_FILE = re.compile(r"\..+\.tmp-\d+-[0-9a-f]+")


def _atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
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
        raise write_failure(path, exc) from exc
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
    import torch  # here, not at the top: text writes (the tokenizer's) need no torch

    _atomic_write(Path(path), lambda file: torch.save(obj, file))


def atomic_write_text(text: str, path: PathLike) -> None:
    """Write a small UTF-8 text file (JSON, YAML) with the same crash safety as `atomic_save`."""
    _atomic_write(Path(path), lambda file: file.write(text.encode("utf-8")))


def atomic_copy(source: PathLike, path: PathLike) -> None:
    """Copy a (small) file to path with the same crash safety as `atomic_save`."""
    data = Path(source).read_bytes()
    _atomic_write(Path(path), lambda file: file.write(data))


def remove_temp_files(directory: PathLike) -> list[Path]:
    """Delete the temporary files that writers killed mid-write left in `directory`; return them.

    Call it only while no other process writes there (holding the run directory's lock)."""
    removed = []
    for path in Path(directory).glob(".*.tmp*"):
        if _TEMP_FILE.fullmatch(path.name) and path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    if removed:
        names = ", ".join(p.name for p in removed)
        logger.info("removed %d temporary file(s) left by an interrupted write: %s", len(removed),
                    names)  # fmt: skip
    return removed

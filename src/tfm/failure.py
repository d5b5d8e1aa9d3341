"""One line saying why a file could not be written or read, for errors that name the file."""

import errno
import shutil
from pathlib import Path

from tfm.errors import CheckpointError, DiskFullError, TfmError

_OUT_OF_SPACE = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file larger than this process may write (ulimit -f)",
}


def brief_error(exc: BaseException) -> str:
    """One line for a cause: torch's messages run over several lines and sentences."""
    if (space := space_error(exc)) is not None:
        return f"{_out_of_space(space)}; free some disk space and retry"
    context = exc.__context__
    if str(exc).startswith("Weights only load failed") and context is not None:
        exc = context  # the unpickler's own reason is in the chained exception
    lines = str(exc).strip().splitlines()
    text = lines[0].split(". ")[0] if lines else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _out_of_space(error: OSError) -> str:
    """What a full-disk OSError says, in words."""
    return _OUT_OF_SPACE.get(error.errno or 0, error.strerror or "no space left")


def space_error(exc: BaseException) -> OSError | None:
    """The OSError saying the disk (or a quota, or a size limit) is full behind exc, if any."""
    cause: BaseException | None = exc
    for _ in range(4):  # torch wraps a full disk in a RuntimeError
        if isinstance(cause, OSError) and cause.errno in _OUT_OF_SPACE:
            return cause
        cause = None if cause is None else cause.__cause__ or cause.__context__
    return None


def write_failure(path: Path, exc: BaseException) -> TfmError:
    """The one-line error for a failed write of `path`: DiskFullError (with the space left on the
    file's disk) when it ran out of space, else CheckpointError with the cause."""
    if (space := space_error(exc)) is None:
        return CheckpointError(
            f"cannot write {path} ({brief_error(exc)}); the previous file, if any, is unchanged"
        )
    return DiskFullError(
        f"cannot write {path}: {_out_of_space(space)} ({free_space(path)} free on its "
        "disk); free some space and run again (the previous file, if any, is unchanged)"
    )


def free_space(path: Path) -> str:
    """The free space on the disk holding `path` (or its nearest existing parent), for humans."""
    for folder in (path, *path.parents):
        try:
            free: float = shutil.disk_usage(folder).free
        except OSError:
            continue
        for unit in ("bytes", "KiB", "MiB", "GiB"):
            if free < 1024 or unit == "GiB":
                return f"{free:.0f} {unit}" if unit == "bytes" else f"{free:.1f} {unit}"
            free /= 1024
    return "unknown space"

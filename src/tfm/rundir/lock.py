"""The run directory's lock: one process at a time trains in a run directory.

Training takes an exclusive `fcntl.flock` on `run_dir/.lock` for the whole run and writes its PID
there. The operating system releases the lock when the process ends, however it ends, so a lock
left by a killed process is simply taken by the next run; a second `tfm train` (plain, `--resume`
or `--overwrite`) while the first is alive is refused with the holder's PID. The lock file itself
stays (removing it would let two processes lock two different files). Holding the lock, a run
removes the temporary files that writers killed mid-write left behind. Under torchrun only process
0 takes it (`tfm.training.distributed`). A process that holds a directory's lock may ask for it
again (a back-translation run holds it across its phases, the last of which trains there).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from tfm.atomic import remove_temp_files
from tfm.errors import RunInUseError
from tfm.failure import write_failure

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
_held: set[Path] = set()  # the directories whose lock this process holds


@contextlib.contextmanager
def run_lock(root: Path) -> Iterator[None]:
    """Hold `root`'s lock (creating `root` if needed) while the body runs; RunInUseError when a
    live process holds it. A `root` it created and left empty is removed again."""
    root = Path(root)
    key = root.resolve()
    if key in _held:  # held further up this process's stack
        yield
        return
    created = not root.exists()
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise write_failure(root / LOCK_FILE, exc) from exc
    held = False
    try:
        _take(fd, root)
        held = True
        _held.add(key)
        remove_temp_files(root)
        if (root / "checkpoints").is_dir():
            remove_temp_files(root / "checkpoints")
        yield
    finally:
        if held:
            _held.discard(key)
        if held and created and not holds_run_files(root):  # e.g. --resume of a run never begun
            (root / LOCK_FILE).unlink(missing_ok=True)
            root.rmdir()
        os.close(fd)  # releases the lock


def _take(fd: int, root: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        raise RunInUseError(
            f"run directory {root} is in use by another tfm process (PID {holder}); wait for it "
            f"to finish or stop it first (kill {holder})"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)


def holds_run_files(root: Path) -> bool:
    """Whether `root` exists and holds anything besides its lock file."""
    return root.is_dir() and any(path.name != LOCK_FILE for path in root.iterdir())


def remove_run_files(root: Path) -> None:
    """Empty `root` for `--overwrite`, keeping the lock file that this process holds."""
    for path in root.iterdir():
        if path.name == LOCK_FILE:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    log.info("--overwrite: removed the previous content of %s", root)

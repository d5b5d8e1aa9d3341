"""The files of a data-cache entry as they are written: rows appended with their offsets, the
SHA-256 digests that show an entry changed since, and a full disk told as the space it needs."""

from __future__ import annotations

import errno
import hashlib
from pathlib import Path
from typing import BinaryIO

import numpy as np

from tfm.data.ragged import OFFSETS
from tfm.errors import DataError


class RowWriter:
    """Appends rows of bytes to `path` and writes their offsets to `offsets` when closed."""

    def __init__(self, path: Path, offsets: Path) -> None:
        self.file: BinaryIO = path.open("wb")
        self.offsets_path, self.ends, self.total = offsets, [np.zeros(1, dtype=OFFSETS)], 0

    def add(self, data: bytes, lengths: np.ndarray) -> None:
        self.file.write(data)
        ends = self.total + np.cumsum(lengths, dtype=OFFSETS)
        self.ends.append(ends)
        self.total = int(ends[-1]) if len(ends) else self.total

    def close(self) -> None:
        self.file.close()
        np.save(self.offsets_path, np.concatenate(self.ends))


def file_digests(folder: Path) -> dict[str, str]:
    """The SHA-256 of each file in `folder` (an entry's, before meta.json is written)."""
    digests = {}
    for path in sorted(folder.iterdir()):
        with path.open("rb") as file:
            digests[path.name] = hashlib.file_digest(file, "sha256").hexdigest()
    return digests


def changed_files(folder: Path, digests: dict[str, str]) -> str | None:
    """The first file of `folder` whose content is not the one `digests` recorded, or None;
    OSError for a missing one."""
    for name, digest in digests.items():
        with (folder / name).open("rb") as file:
            if hashlib.file_digest(file, "sha256").hexdigest() != digest:
                return name
    return None


class no_space_left:
    """A full disk met while writing is a DataError that says how much space the entry needs."""

    def __init__(self, root: Path, needed: int) -> None:
        self.root, self.needed = root, needed

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, traceback) -> None:
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise DataError(no_space(self.root, self.needed, None)) from None


def no_space(root: Path, needed: int, free: int | None) -> str:
    """The one line that says the entry needs `needed` bytes under `root`, where `free` are free
    (None: the disk is full)."""
    have = f", {_size(free)} are free" if free is not None else " and the disk is full"
    return (
        f"data.cache_dir {root}: preparing the training split needs about {_size(needed)}"
        f"{have}; free some space or set data.cache_dir to a folder on a larger disk"
    )


def _size(n_bytes: int) -> str:
    """A size in the unit that shows it: GB from 1 GB up, MB from 1 MB up, else kB."""
    if n_bytes >= 1e9:
        return f"{n_bytes / 1e9:.1f} GB"
    if n_bytes >= 1e6:
        return f"{n_bytes / 1e6:.1f} MB" if n_bytes < 1e7 else f"{n_bytes / 1e6:.0f} MB"
    return f"{n_bytes / 1e3:.0f} kB"

"""Read-only sequences of variable-length rows kept in flat arrays, for corpora larger than memory.

`RaggedIds` holds the framed token ids of every pair of a split as one flat integer array (the
smallest unsigned type that holds the vocabulary, see `id_dtype`) and an offsets array: row i is
`values[offsets[i]:offsets[i + 1]]`. Both are usually memory-mapped files of the data cache
(`tfm.data.cache.prepared_cache`), so a corpus costs memory only for the pages a batch touches.
`RaggedText` does the same for sentences, as UTF-8 bytes. An optional `selection` picks and orders
rows (the pairs kept after length filtering) without copying.

They stand in for `list[list[int]]` and `list[str]`: `len(x)`, `x[i]` (a new list of ints, or a
str), iteration, slices (as lists) and `==` against any sequence behave as on lists, and
`RaggedIds.lengths` gives every row's length as one array (for batching); `+` joins as a view.
`Joined` and `Reframed` are lazy views, e.g. for the both-ways epochs (`tfm.data.bidirectional`).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self, overload

import numpy as np

OFFSETS = np.int64


def id_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds ids 0 .. vocab_size - 1."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if vocab_size - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    raise ValueError(f"vocab_size={vocab_size} does not fit in 32 bits")


def lengths_of(rows: Sequence[Sequence[Any]]) -> np.ndarray:
    """Each row's length as an int64 array: the stored one where there is one."""
    lengths = getattr(rows, "lengths", None)
    if lengths is not None:
        return lengths
    return np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))


class _Rows(Sequence):
    """List behaviour shared by the sequences here: slices as lists, == against sequences."""

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.row(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"row {i} of {n}")
        return self.row(i % n)

    def row(self, i: int) -> Any:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are unhashable

    def __add__(self, other: object) -> Joined:
        """`a + b` as on lists, as a `Joined` view (nothing is copied)."""
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return Joined(self, other)

    def __radd__(self, other: object) -> Joined:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return Joined(other, self)


class _Flat(_Rows):
    """Rows `values[offsets[j]:offsets[j + 1]]` for j in `selection` (all rows when None)."""

    def __init__(
        self,
        *,
        values: np.ndarray,
        offsets: np.ndarray,
        selection: np.ndarray | None = None,
        mapping: mmap.mmap | None = None,
    ) -> None:
        if offsets.ndim != 1 or len(offsets) < 1 or int(offsets[-1]) != len(values):
            raise ValueError(
                f"offsets must end at the number of values ({len(values)}), got "
                f"{int(offsets[-1]) if len(offsets) else 'no offsets'}"
            )
        self.values, self.offsets, self.selection = values, offsets, selection
        self.mapping = mapping  # the file `values` is read from, if it is mapped
        self._lengths: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1 if self.selection is None else len(self.selection)

    @property
    def lengths(self) -> np.ndarray:
        """Every row's length, in row order (int64, computed once)."""
        if self._lengths is None:
            lengths = np.diff(self.offsets)
            self._lengths = lengths if self.selection is None else lengths[self.selection]
        return self._lengths

    def release(self) -> None:
        """Give back every page of a mapped file read so far (they are read again when
        needed): after reading rows spread over the whole file, as a random sample is."""
        if self.mapping is not None and _RELEASE is not None and len(self.mapping):
            self.mapping.madvise(_RELEASE)

    def subset(self, index: np.ndarray) -> Self:
        """The rows `index` (of this sequence), sharing the arrays."""
        index = np.asarray(index, dtype=np.int64)
        base = index if self.selection is None else self.selection[index]
        return type(self)(
            values=self.values, offsets=self.offsets, selection=base, mapping=self.mapping
        )

    def _blocks(
        self, first: int = 0, stop: int | None = None
    ) -> Iterator[tuple[np.ndarray, list[int]]]:
        """Rows `first` to `stop` (all of them) in order, a block at a time: a copy of the block's
        values, and where each row starts and ends in it. A mapped file's pages are given back
        once copied, so that a full pass (encoding, `tfm data check`) does not fill the process's
        memory with them."""
        stop = len(self) if stop is None else stop
        for start in range(first, stop, _BLOCK):
            bounds = self.offsets[start : min(start + _BLOCK, stop) + 1]
            a, b = int(bounds[0]), int(bounds[-1])
            block = np.array(self.values[a:b])
            if self.mapping is not None and _RELEASE is not None:
                itemsize = self.values.itemsize
                # From a little before the block: reading its first page can map the pages
                # around it again (fault-around, or the large folio the page cache holds it
                # in), the last block's among them. Whole pages only.
                low = max(0, a * itemsize - _BEHIND) // mmap.PAGESIZE * mmap.PAGESIZE
                if b * itemsize > low:
                    self.mapping.madvise(_RELEASE, low, b * itemsize - low)
            yield block, (bounds - bounds[0]).tolist()

    def _span(self, i: int) -> tuple[int, int]:
        j = i if self.selection is None else int(self.selection[i])
        return int(self.offsets[j]), int(self.offsets[j + 1])


class RaggedIds(_Flat):
    """Framed token ids per pair; `x[i]` is a new `list[int]`."""

    def row(self, i: int) -> list[int]:
        a, b = self._span(i)
        return self.values[a:b].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        if self.selection is not None:
            yield from map(self.row, range(len(self)))
            return
        for block, cuts in self._blocks():
            values = block.tolist()
            yield from (values[a:b] for a, b in zip(cuts, cuts[1:]))  # noqa: B905

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[int]], *, dtype: Any = np.uint32) -> RaggedIds:
        """An in-memory copy of `rows` (tests and small splits)."""
        lengths = lengths_of(rows)
        offsets = np.zeros(len(lengths) + 1, dtype=OFFSETS)
        np.cumsum(lengths, out=offsets[1:])
        values = np.fromiter((i for r in rows for i in r), dtype=dtype, count=int(offsets[-1]))
        return cls(values=values, offsets=offsets)

    @classmethod
    def open(cls, stem: Path, dtype: np.dtype) -> RaggedIds:
        """Map `stem.ids` (raw `dtype` values) and `stem.offsets.npy` read-only."""
        return cls(**_mapped(stem, ".ids", dtype))


class RaggedText(_Flat):
    """Sentences as UTF-8 bytes; `x[i]` is a str."""

    def row(self, i: int) -> str:
        a, b = self._span(i)
        return self.values[a:b].tobytes().decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        if self.selection is not None:
            yield from map(self.row, range(len(self)))
            return
        yield from self._decoded(0, len(self))

    def read(self, start: int, stop: int) -> list[str]:
        """Rows `start` to `stop` of all rows (not of a subset), read block by block."""
        if self.selection is not None:
            raise ValueError("read() is for all rows, not for a subset")
        return list(self._decoded(start, min(stop, len(self))))

    def _decoded(self, first: int, stop: int) -> Iterator[str]:
        for block, cuts in self._blocks(first, stop):
            data = block.tobytes()
            yield from (data[a:b].decode("utf-8") for a, b in zip(cuts, cuts[1:]))  # noqa: B905

    @classmethod
    def open(cls, stem: Path) -> RaggedText:
        """Map `stem.text` (UTF-8) and `stem.text-offsets.npy` read-only."""
        return cls(**_mapped(stem, ".text", np.dtype(np.uint8)))


_BLOCK = 4096  # rows read at a time when iterating
_RELEASE = getattr(mmap, "MADV_DONTNEED", None)  # Linux and macOS; elsewhere pages stay mapped
_BEHIND = 2 << 20  # bytes before a block given back with it: a huge page, the largest folio


def _mapped(stem: Path, suffix: str, dtype: np.dtype) -> dict[str, Any]:
    offsets = np.load(f"{stem}{suffix}-offsets.npy", mmap_mode="r")
    path = Path(f"{stem}{suffix}")
    if path.stat().st_size == 0:  # an empty file cannot be mapped
        return {"values": np.zeros(0, dtype=dtype), "offsets": offsets}
    with path.open("rb") as file:
        mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    return {"values": np.frombuffer(mapping, dtype=dtype), "offsets": offsets, "mapping": mapping}


# --- lazy views for both-ways epochs -----------------------------------------------------------


class Joined(_Rows):
    """The rows of `first`, then those of `second`, without copying either."""

    def __init__(self, first: Sequence[Sequence[int]], second: Sequence[Sequence[int]]) -> None:
        self.first, self.second = first, second
        self.lengths = np.concatenate([lengths_of(first), lengths_of(second)])

    def __len__(self) -> int:
        return len(self.first) + len(self.second)

    def row(self, i: int) -> Any:
        n = len(self.first)
        return self.first[i] if i < n else self.second[i - n]


class Reframed(_Rows):
    """Each row of `base` without its first `drop` ids and with `prefix` put in front."""

    def __init__(
        self, base: Sequence[Sequence[int]], *, drop: int = 0, prefix: Sequence[int] = ()
    ) -> None:
        self.base, self.drop, self.prefix = base, drop, list(prefix)
        self.lengths = lengths_of(base) - drop + len(self.prefix)

    def __len__(self) -> int:
        return len(self.base)

    def row(self, i: int) -> list[int]:
        return [*self.prefix, *self.base[i][self.drop :]]

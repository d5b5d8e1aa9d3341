"""Monolingual text for back-translation (`data.monolingual`): read once, cleaned, kept in the
data cache, and the lines a run back-translates chosen from it.

    text = prepared_monolingual(config)        # prepares it on the first call, maps it after
    chosen = choose_lines(text, count=40_000, seed=0, leaks=references, fits=within_limit)

Preparing streams each file once (`formats.iter_lines`: UTF-8, lines end at "\\n"), strips each
line, drops the empty ones and those over `MAX_LINE_CHARS` characters (counted), turns a tab
inside a line into a space (the synthetic corpus is a TSV file; the tokenizer reads any run of
whitespace as one space anyway) and appends the rest to a `RaggedText` in the cache folder
`mono-<key>`, where the key hashes the files' bytes and the language: a moved file is still a
hit, an edited one a miss. Memory stays bounded whatever the size: no list of the lines is held.

`choose_lines` walks a seeded permutation of the lines and keeps the first `count` that are not
a validation or test sentence (which would leak a reference into training: dropped and counted)
and that the tokenizer keeps within `data.max_length` (dropped and counted); the kept lines go
back to file order. The same text, count and seed choose the same lines.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from tfm.config import Config, DataConfig
from tfm.data.cache.cache_folder import cache_root, scratch_folder
from tfm.data.cache.cache_key import ContentDigests
from tfm.data.cache.entry_files import RowWriter
from tfm.data.formats import iter_lines
from tfm.data.ragged import OFFSETS, RaggedText
from tfm.errors import DataError
from tfm.limits import MAX_LINE_CHARS

log = logging.getLogger(__name__)

VERSION = 1  # of a monolingual entry's layout
META = "meta.json"
STEM = "lines"  # lines.text and lines.text-offsets.npy
CHUNK = 20_000  # lines written or examined at a time


def monolingual_key(data: DataConfig, index: int) -> str:
    return f"data.monolingual[{index}]"


def check_monolingual(data: DataConfig) -> None:
    """Before any work: every monolingual file is there and holds something (DataError naming
    its key)."""
    for i, text in enumerate(data.monolingual):
        path = Path(text.path)
        key = monolingual_key(data, i)
        if not path.is_file():
            raise DataError(f"{key}.path: {path}: no such file")
        if path.stat().st_size == 0:
            raise DataError(f"{key}.path: {path} is empty; give a file of sentences, one a line")


@dataclass(frozen=True)
class MonolingualText:
    """The cleaned lines of `data.monolingual`, one file after another, in the cache folder
    `path`; `meta` says what was read and dropped."""

    path: Path
    meta: dict

    def lines(self) -> RaggedText:
        return RaggedText.open(self.path / STEM)

    def __len__(self) -> int:
        return int(self.meta["kept"])

    def summary(self) -> str:
        """One line: what was read from where and what was dropped."""
        dropped = self.meta["dropped"]
        reasons = ", ".join(f"{reason}: {n:,}" for reason, n in dropped.items() if n)
        files = ", ".join(self.meta["files"])
        return (
            f"monolingual {self.meta['lang']}: read {self.meta['read']:,} lines from {files}, "
            f"kept {self.meta['kept']:,}, dropped {sum(dropped.values()):,}"
            + (f" ({reasons})" if reasons else "")
        )


def prepared_monolingual(config: Config, *, progress: bool = True) -> MonolingualText:
    """The config's monolingual text from the cache, prepared first if no run has (module
    docstring)."""
    data = config.data
    check_monolingual(data)
    root = cache_root(config)
    digests = ContentDigests(root)
    files = [Path(text.path) for text in data.monolingual]
    known = [digests.known(path) for path in files]
    if all(k is not None for k in known):
        found = _open(root / _key(data, [k for k in known if k is not None]))
        if found is not None:
            return found
    return _prepare(config, root, digests, files, progress=progress)


def _key(data: DataConfig, digests: Sequence[tuple[str, int]]) -> str:
    parts = {"version": VERSION, "lang": data.tgt_lang, "files": [list(d) for d in digests]}
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return "mono-" + hashlib.sha256(canonical.encode()).hexdigest()[:20]


def _open(path: Path) -> MonolingualText | None:
    try:
        meta = json.loads((path / META).read_text(encoding="utf-8"))
        text = MonolingualText(path, meta)
        if meta.get("version") != VERSION or len(text.lines()) != meta["kept"]:
            return None
    except (OSError, ValueError, KeyError):
        return None
    return text


def _prepare(
    config: Config, root: Path, digests: ContentDigests, files: list[Path], *, progress: bool
) -> MonolingualText:
    data = config.data
    folder = scratch_folder(root, ".tmp-mono")
    folder.mkdir()
    try:
        counts = _write_lines(data, files, folder, digests, progress=progress)
        digests.remember()
        key = _key(data, [digests.read(path) for path in files])
        meta = {"version": VERSION, "lang": data.tgt_lang, "files": [str(f) for f in files],
                **counts}  # fmt: skip
        (folder / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        shutil.rmtree(root / key, ignore_errors=True)  # left by a failed attempt
        os.replace(folder, root / key)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    text = _open(root / key)
    if text is None:
        raise DataError(f"{root / key}: the prepared monolingual text cannot be read back")
    log.info("%s (prepared in %s)", text.summary(), root / key)
    return text


def _write_lines(
    data: DataConfig, files: list[Path], folder: Path, digests: ContentDigests, *, progress: bool
) -> dict:
    writer = RowWriter(folder / f"{STEM}.text", folder / f"{STEM}.text-offsets.npy")
    read, empty, long = 0, 0, 0
    with tqdm(desc="reading monolingual text", unit=" lines", unit_scale=True, leave=False,
              disable=None if progress else True, dynamic_ncols=True) as bar:  # fmt: skip
        for i, path in enumerate(files):
            key = f"{monolingual_key(data, i)}.path"
            lines = iter_lines(path, key=key, hashing=digests)
            for chunk in _chunks(lines):
                kept = []
                for line in chunk:
                    line = line.strip()
                    if not line:
                        empty += 1
                    elif len(line) > MAX_LINE_CHARS:
                        long += 1
                    else:
                        kept.append(line.replace("\t", " ").encode("utf-8"))
                read += len(chunk)
                writer.add(b"".join(kept), np.fromiter(map(len, kept), dtype=OFFSETS))
                bar.update(len(chunk))
    writer.close()
    kept_n = read - empty - long
    if not kept_n:
        names = ", ".join(str(f) for f in files)
        raise DataError(f"data.monolingual: {names} hold no sentences ({read:,} blank lines)")
    dropped = {"empty": empty, f"over {MAX_LINE_CHARS:,} characters": long}
    return {"read": read, "kept": kept_n, "dropped": dropped}


def _chunks(lines: Iterator[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@dataclass
class Chosen:
    """The lines chosen to back-translate (indices into the text, in file order) and what was
    left out on the way: `leaks` (a validation or test sentence) and `long` (over the length
    limit), counted among the lines examined (`examined`)."""

    index: np.ndarray
    examined: int = 0
    leaks: int = 0
    long: int = 0

    def summary(self, available: int) -> str:
        drops = []
        if self.leaks:
            drops.append(f"{self.leaks:,} identical to a validation or test sentence (a leak)")
        if self.long:
            drops.append(f"{self.long:,} over data.max_length")
        dropped = f"; dropped {', '.join(drops)}" if drops else ""
        return (
            f"{len(self.index):,} of the {available:,} lines chosen ({self.examined:,} "
            f"examined{dropped})"
        )


def choose_lines(
    text: MonolingualText,
    *,
    count: int,
    seed: int,
    leaks: set[str],
    fits: Callable[[list[str]], list[bool]],
) -> Chosen:
    """The first `count` lines of a seeded permutation of `text` that are not in `leaks` and
    that `fits` keeps, back in file order (module docstring); the lines are examined `CHUNK` at
    a time, and the drops counted in every chunk examined."""
    lines = text.lines()
    order = np.random.default_rng(seed).permutation(len(lines))
    chosen, kept, taken = Chosen(np.zeros(0, np.int64)), [], 0
    for start in range(0, len(order), CHUNK):
        if taken >= count:
            break
        part = order[start : start + CHUNK]
        rows = [lines[int(i)] for i in part]
        clean = [row not in leaks for row in rows]
        within = iter(fits([row for row, ok in zip(rows, clean, strict=True) if ok]))
        keep = np.array([ok and next(within) for ok in clean], dtype=bool)
        chosen.examined += len(part)
        chosen.leaks += clean.count(False)
        chosen.long += sum(clean) - int(keep.sum())
        kept.append(part[keep][: count - taken])
        taken += len(kept[-1])
    chosen.index = np.sort(np.concatenate(kept)) if kept else chosen.index
    return chosen

"""Readers for the parallel-corpus file formats: `text`, `tsv` and `jsonl`.

Each reader returns `Pairs`: aligned source and target sentences as read, one per line, so pair i
comes from line i + 1 of the file(s). Stripping and dropping empty pairs happen in `corpus.py`.

Line handling, shared by all three formats (`read_lines`):
- a UTF-8 byte order mark at the start of a file is removed;
- lines end at b"\n" only: U+2028, U+2029, U+0085, a lone "\r", form feeds and vertical tabs stay
  inside the sentence (no `str.splitlines()`, no universal newlines), so they cannot shift pairs;
- one "\r" right before the "\n" is part of a CRLF line ending and removed;
- a newline at the end of the file does not make an extra empty line;
- invalid UTF-8 is an error naming the file, the line and the byte within the line.
A blank line in a `tsv` or `jsonl` file reads as a pair with two empty sides (dropped, counted).
A JSON null reads as an empty side.
"""

from __future__ import annotations

import functools
import json
import logging
import shlex
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, Protocol

from tfm.errors import DataError

logger = logging.getLogger(__name__)

BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # little- and big-endian
BLOCK_SIZE = 1 << 22  # bytes read at a time: 4 MiB
CHUNK = 20_000  # pairs handed on at a time (`chunked`)


class Pairs(NamedTuple):
    """Aligned sentences as read; `origin` says what was read, `unit` what index i counts."""

    src: list[str]
    tgt: list[str]
    origin: str
    unit: str  # "line": pair i is line i + 1; "row": pair i is dataset row i


class PairStream(NamedTuple):
    """`Pairs` one at a time, for corpora larger than memory; errors come as the pairs are read."""

    pairs: Iterator[tuple[str, str]]
    origin: str
    unit: str


def chunked(pairs: Iterable[tuple[str, str]], size: int = CHUNK) -> Iterator[list[tuple[str, str]]]:
    """`pairs` in lists of `size` (the last one shorter): what reads a stream (the screen, the
    cleaner, the data cache's writer) then takes a list at a time, not one pair at a time."""
    iterator = iter(pairs)
    while chunk := list(islice(iterator, size)):
        yield chunk


def read_lines(path: Path, *, key: str) -> list[str]:
    """The lines of a UTF-8 file, split on b"\\n" only; `key` is the config key to fix."""
    return list(iter_lines(path, key=key))


class Hashing(Protocol):
    """Told every block of bytes a file is read in (the data cache hashes a corpus as it reads
    it: `cache_key.ContentDigests`)."""

    def update(self, path: Path, block: bytes) -> None: ...


def iter_lines(
    path: Path, *, key: str, block_size: int = BLOCK_SIZE, hashing: Hashing | None = None
) -> Iterator[str]:
    """`read_lines`, one line at a time: the file is read in blocks of `block_size` bytes, so a
    corpus larger than memory streams through (each block told to `hashing`). The file is opened
    at the first `next()`."""
    try:
        file = path.open("rb")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file (check {key})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror}; check {key})") from None
    with file:
        yield from _decoded_lines(file, path, key=key, block_size=block_size, hashing=hashing)


def _decoded_lines(
    file: BinaryIO, path: Path, *, key: str, block_size: int, hashing: Hashing | None
) -> Iterator[str]:
    """Each block is cut after its last b"\\n" (the rest is carried into the next one), decoded
    and split; `bom` keeps byte positions on line 1 as in the file, BOM included."""
    number, carry, inner_cr, bom = 0, b"", 0, 0
    while True:
        try:
            block = file.read(block_size)
        except OSError as exc:
            raise DataError(f"{path}: cannot read it ({exc.strerror}; check {key})") from None
        if hashing is not None:
            hashing.update(path, block)
        if number == 0 and not carry and block.startswith(BOM):
            block, bom = block[len(BOM) :], len(BOM)
        if number == 0 and not carry and not bom and block.startswith(UTF16_BOMS):
            raise DataError(
                f"{path}: UTF-16 text (it starts with a UTF-16 byte order mark); save it as UTF-8 "
                f"(iconv -f UTF-16 -t UTF-8 {shlex.quote(str(path))})"
            )
        if block:
            data = carry + block
            end = data.rfind(b"\n") + 1
            chunk, carry = data[:end], data[end:]
        else:  # the end of the file: what is left is the last line, without a newline
            chunk, carry = carry, b""
        if chunk:
            inner_cr += chunk.count(b"\r") - chunk.count(b"\r\n")
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(_invalid_utf8(path, chunk, exc.start, number, bom)) from None
            lines = text.split("\n")
            if block:
                lines.pop()  # the empty rest after the chunk's final newline
            number += len(lines)
            yield from (line[:-1] if line.endswith("\r") else line for line in lines)
        if not block:
            break
    if inner_cr:
        logger.warning("%s: %d carriage returns inside lines, kept as text", path, inner_cr)


def _invalid_utf8(path: Path, data: bytes, position: int, lines_before: int, bom: int) -> str:
    line = lines_before + data.count(b"\n", 0, position) + 1
    column = position - (data.rfind(b"\n", 0, position) + 1) + 1
    column += bom if line == 1 else 0  # a byte position in the file, as an editor counts it
    bad = data[position : position + 4]
    return (
        f"{path}:{line}: invalid UTF-8 at byte {column} of the line ({bad!r}); expected UTF-8 text"
    )


def collect(stream: PairStream) -> Pairs:
    """All pairs of `stream` in two lists."""
    src, tgt = [], []
    for src_text, tgt_text in stream.pairs:
        src.append(src_text)
        tgt.append(tgt_text)
    return Pairs(src, tgt, stream.origin, stream.unit)


def read_text(prefix: str, *, src_lang: str, tgt_lang: str, key: str) -> Pairs:
    """Two aligned files `{prefix}.{src_lang}` and `{prefix}.{tgt_lang}`, one sentence a line."""
    return collect(text_pairs(prefix, src_lang=src_lang, tgt_lang=tgt_lang, key=key))


def text_pairs(
    prefix: str, *, src_lang: str, tgt_lang: str, key: str, hashing: Hashing | None = None
) -> PairStream:
    """`read_text`, streamed (the files' bytes told to `hashing`)."""
    (src_path, hint), (tgt_path, _) = files_read(
        "text", prefix, key=key, src_lang=src_lang, tgt_lang=tgt_lang
    )

    def pairs() -> Iterator[tuple[str, str]]:
        src = iter_lines(src_path, key=hint, hashing=hashing)
        tgt = iter_lines(tgt_path, key=hint, hashing=hashing)
        n = 0
        while True:
            src_text, tgt_text = next(src, None), next(tgt, None)
            if src_text is None or tgt_text is None:
                break
            n += 1
            yield src_text, tgt_text
        if src_text is not None or tgt_text is not None:  # one file ended first: count the other
            n_src = n + (src_text is not None) + sum(1 for _ in src)
            n_tgt = n + (tgt_text is not None) + sum(1 for _ in tgt)
            raise DataError(
                f"{src_path} has {n_src:,} lines but {tgt_path} has {n_tgt:,}; "
                "aligned files need the same number of lines"
            )

    return PairStream(pairs(), f"{prefix}.{{{src_lang},{tgt_lang}}}", "line")


def text_files(prefix: str, *, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    """The two files format `text` reads, source first."""
    return Path(f"{prefix}.{src_lang}"), Path(f"{prefix}.{tgt_lang}")


def files_read(
    format: str, path: str, *, key: str, src_lang: str, tgt_lang: str
) -> list[tuple[Path, str]]:
    """The files the file format `format` reads for the source at `path` (config key `key`,
    such as "data.train"), each with what its errors tell the user to check; [] for the formats
    that read no file of their own (toy, hub, disk)."""
    if format == "text":
        src_path, tgt_path = text_files(path, src_lang=src_lang, tgt_lang=tgt_lang)
        hint = f"{key}.path is '{path}'; format 'text' reads {src_path} and {tgt_path}"
        return [(src_path, hint), (tgt_path, hint)]
    if format in ("tsv", "jsonl"):
        return [(Path(path), f"{key}.path")]
    return []


def check_files_exist(files: Iterable[tuple[Path, str]]) -> None:
    """DataError for the first of `files` (`files_read`'s) that is not there, in the words
    reading it would use: found before any file is read."""
    for path, hint in files:
        if not path.exists():
            raise DataError(f"{path}: no such file (check {hint})")


def read_tsv(
    path: str, *, columns: list[str] | None, src_lang: str, tgt_lang: str, key: str
) -> Pairs:
    """One file, two tab-separated columns; `columns` names the language of each (file order).

    No quote processing: a '"' is text, so it cannot swallow the lines after it.
    """
    return collect(tsv_pairs(path, columns=columns, src_lang=src_lang, tgt_lang=tgt_lang, key=key))


def tsv_pairs(
    path: str,
    *,
    columns: list[str] | None,
    src_lang: str,
    tgt_lang: str,
    key: str,
    hashing: Hashing | None = None,
) -> PairStream:
    """`read_tsv`, streamed (the file's bytes told to `hashing`)."""
    columns = columns if columns is not None else [src_lang, tgt_lang]
    if len(columns) != 2 or set(columns) != {src_lang, tgt_lang}:
        raise DataError(
            f"{key}.columns is {columns}; expected the two languages '{src_lang}' and "
            f"'{tgt_lang}' in the order of the file's columns"
        )
    src_column = columns.index(src_lang)
    headers = [{c.lower() for c in columns}, {"src", "tgt"}, {"source", "target"}]

    def pairs() -> Iterator[tuple[str, str]]:
        lines = iter_lines(Path(path), key=f"{key}.path", hashing=hashing)
        for number, line in enumerate(lines, start=1):
            fields = line.split("\t")
            if number == 1 and {f.strip().lower() for f in fields} in headers:
                raise DataError(
                    f"{path}:1: a header ({_preview(line)}), not a pair: every line of a tsv "
                    f"file is one; remove it (`tail -n +2 {shlex.quote(path)}` prints the rest)"
                )
            if len(fields) != 2:
                if line.strip():
                    raise DataError(
                        f"{path}:{number}: expected 2 tab-separated fields ({columns[0]}, "
                        f"{columns[1]}), found {len(fields)}: {_preview(line)}"
                    )
                fields = ["", ""]
            yield fields[src_column], fields[1 - src_column]

    return PairStream(pairs(), path, "line")


def read_jsonl(
    path: str, *, fields: dict[str, str], src_lang: str, tgt_lang: str, key: str
) -> Pairs:
    """One JSON object a line; `fields` maps a language to its field ("a.b" is nested)."""
    return collect(jsonl_pairs(path, fields=fields, src_lang=src_lang, tgt_lang=tgt_lang, key=key))


def jsonl_pairs(
    path: str,
    *,
    fields: dict[str, str],
    src_lang: str,
    tgt_lang: str,
    key: str,
    hashing: Hashing | None = None,
) -> PairStream:
    """`read_jsonl`, streamed (the file's bytes told to `hashing`). The first object decides
    where a language that `fields` does not name is read (`nested_default`)."""
    names = field_names(fields, src_lang=src_lang, tgt_lang=tgt_lang, key=key)

    def pairs() -> Iterator[tuple[str, str]]:
        (src_field, tgt_field), decided = names, False
        lines = iter_lines(Path(path), key=f"{key}.path", hashing=hashing)
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                yield "", ""
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(
                    f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno})"
                ) from None
            if not isinstance(record, dict):
                found = type(record).__name__
                raise DataError(f"{path}:{number}: expected a JSON object, found {found}")
            where = f"{path}:{number}"
            if not decided:
                has = functools.partial(_has, record)
                src_field, tgt_field = (
                    nested_default(fields, lang, name, has)
                    for lang, name in zip((src_lang, tgt_lang), names, strict=True)
                )
                decided = True
            yield (
                _lookup(record, src_field, lang=src_lang, where=where, key=key),
                _lookup(record, tgt_field, lang=tgt_lang, where=where, key=key),
            )

    return PairStream(pairs(), path, "line")


TRANSLATION = "translation"  # where the hub's translation datasets keep the text of each language


def nested_default(fields: dict[str, str], lang: str, name: str, has: Callable[[str], bool]) -> str:
    """`name`, the field of `lang`; or, where `fields` does not name it and the data has no
    such field but has `translation.{lang}` (the layout of the hub's translation datasets:
    `{"translation": {"de": …, "en": …}}`), that one."""
    nested = f"{TRANSLATION}.{lang}"
    if lang not in fields and not has(name) and has(nested):
        return nested
    return name


def field_names(fields: dict[str, str], *, src_lang: str, tgt_lang: str, key: str) -> list[str]:
    """The field or column name of each side; a language missing from `fields` is its own name."""
    unknown = sorted(set(fields) - {src_lang, tgt_lang})
    if unknown:
        raise DataError(
            f"{key}.fields has {unknown}, which are not languages of this run "
            f"(src_lang '{src_lang}', tgt_lang '{tgt_lang}')"
        )
    names = [fields.get(src_lang, src_lang), fields.get(tgt_lang, tgt_lang)]
    if names[0] == names[1]:
        raise DataError(f"{key}.fields reads both sides from the same field '{names[0]}'")
    return names


_MISSING = object()


def _field(record: dict[str, Any], name: str) -> Any:
    """record[name], where "a.b" means record["a"]["b"] unless "a.b" itself is a key;
    `_MISSING` where there is no such field."""
    value: Any = record
    for part in [name] if name in record else name.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _has(record: dict[str, Any], name: str) -> bool:
    """Whether `record` has the field `name` (`_field`)."""
    return _field(record, name) is not _MISSING


def _lookup(record: dict[str, Any], name: str, *, lang: str, where: str, key: str) -> str:
    """The text of the field `name` of `record` (`_field`); a null is an empty side."""
    value = _field(record, name)
    if value is _MISSING:
        keys = ", ".join(record)
        raise DataError(f"{where}: no field '{name}' for '{lang}' (keys: {keys}); set {key}.fields")
    if value is None:
        return ""
    if not isinstance(value, str):
        found = type(value).__name__
        raise DataError(f"{where}: field '{name}' holds {found}, expected a string")
    return value


def _preview(line: str, width: int = 60) -> str:
    return repr(line if len(line) <= width else line[:width] + "…")

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

import json
import logging
from pathlib import Path
from typing import Any, NamedTuple

from tfm.errors import DataError

logger = logging.getLogger(__name__)

BOM = b"\xef\xbb\xbf"


class Pairs(NamedTuple):
    """Aligned sentences as read; `origin` says what was read, `unit` what index i counts."""

    src: list[str]
    tgt: list[str]
    origin: str
    unit: str  # "line": pair i is line i + 1; "row": pair i is dataset row i


def read_lines(path: Path, *, key: str) -> list[str]:
    """The lines of a UTF-8 file, split on b"\\n" only; `key` is the config key to fix."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file (check {key})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror}; check {key})") from None
    start = len(BOM) if data.startswith(BOM) else 0
    try:
        text = data[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(_invalid_utf8(path, data, start + exc.start)) from None
    lines = text.split("\n")
    if lines[-1] == "":  # the final newline, or an empty file
        lines.pop()
    n_inner_cr = text.count("\r") - text.count("\r\n")
    if n_inner_cr:
        logger.warning("%s: %d carriage returns inside lines, kept as text", path, n_inner_cr)
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _invalid_utf8(path: Path, data: bytes, position: int) -> str:
    line = data.count(b"\n", 0, position) + 1
    column = position - (data.rfind(b"\n", 0, position) + 1) + 1
    bad = data[position : position + 4]
    return (
        f"{path}:{line}: invalid UTF-8 at byte {column} of the line ({bad!r}); expected UTF-8 text"
    )


def read_text(prefix: str, *, src_lang: str, tgt_lang: str, key: str) -> Pairs:
    """Two aligned files `{prefix}.{src_lang}` and `{prefix}.{tgt_lang}`, one sentence a line."""
    src_path, tgt_path = Path(f"{prefix}.{src_lang}"), Path(f"{prefix}.{tgt_lang}")
    hint = f"{key}.path is '{prefix}'; format 'text' reads {src_path} and {tgt_path}"
    src = read_lines(src_path, key=hint)
    tgt = read_lines(tgt_path, key=hint)
    if len(src) != len(tgt):
        raise DataError(
            f"{src_path} has {len(src):,} lines but {tgt_path} has {len(tgt):,}; "
            "aligned files need the same number of lines"
        )
    return Pairs(src, tgt, f"{prefix}.{{{src_lang},{tgt_lang}}}", "line")


def read_tsv(
    path: str, *, columns: list[str] | None, src_lang: str, tgt_lang: str, key: str
) -> Pairs:
    """One file, two tab-separated columns; `columns` names the language of each (file order).

    No quote processing: a '"' is text, so it cannot swallow the lines after it.
    """
    columns = columns if columns is not None else [src_lang, tgt_lang]
    if len(columns) != 2 or set(columns) != {src_lang, tgt_lang}:
        raise DataError(
            f"{key}.columns is {columns}; expected the two languages '{src_lang}' and "
            f"'{tgt_lang}' in the order of the file's columns"
        )
    src_column = columns.index(src_lang)
    src, tgt = [], []
    for number, line in enumerate(read_lines(Path(path), key=f"{key}.path"), start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            if line.strip():
                raise DataError(
                    f"{path}:{number}: expected 2 tab-separated fields ({columns[0]}, "
                    f"{columns[1]}), found {len(fields)}: {_preview(line)}"
                )
            fields = ["", ""]
        src.append(fields[src_column])
        tgt.append(fields[1 - src_column])
    return Pairs(src, tgt, path, "line")


def read_jsonl(
    path: str, *, fields: dict[str, str], src_lang: str, tgt_lang: str, key: str
) -> Pairs:
    """One JSON object a line; `fields` maps a language to its field ("a.b" is nested)."""
    src_field, tgt_field = field_names(fields, src_lang=src_lang, tgt_lang=tgt_lang, key=key)
    src, tgt = [], []
    for number, line in enumerate(read_lines(Path(path), key=f"{key}.path"), start=1):
        if not line.strip():
            src.append("")
            tgt.append("")
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
        src.append(_lookup(record, src_field, lang=src_lang, where=where, key=key))
        tgt.append(_lookup(record, tgt_field, lang=tgt_lang, where=where, key=key))
    return Pairs(src, tgt, path, "line")


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


def _lookup(record: dict[str, Any], name: str, *, lang: str, where: str, key: str) -> str:
    """record[name], where "a.b" means record["a"]["b"] unless "a.b" itself is a key."""
    value: Any = record
    parts = [name] if name in record else name.split(".")
    for part in parts:
        if not isinstance(value, dict) or part not in value:
            keys = ", ".join(record)
            raise DataError(
                f"{where}: no field '{name}' for '{lang}' (keys: {keys}); set {key}.fields"
            )
        value = value[part]
    if value is None:
        return ""
    if not isinstance(value, str):
        found = type(value).__name__
        raise DataError(f"{where}: field '{name}' holds {found}, expected a string")
    return value


def _preview(line: str, width: int = 60) -> str:
    return repr(line if len(line) <= width else line[:width] + "…")

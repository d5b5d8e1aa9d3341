"""The lines `tfm translate` reads: its arguments, a file, or stdin."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from tfm.data.formats import read_lines
from tfm.errors import UsageError


def translation_input(
    sentences: Sequence[str], file: Path | None, stdin: TextIO
) -> Iterator[list[str]]:
    """Batches of lines to translate: the sentences given as arguments, else the lines of
    `file`, else stdin's lines. Arguments and the file are read now, stdin when the batch is
    taken."""
    if sentences and file is not None:
        raise UsageError("give sentences or --file, not both")
    if sentences:
        return iter([list(sentences)])
    if file is not None:
        return iter([read_lines(file, key="--file")])
    if stdin.isatty():
        raise UsageError("nothing to translate: give sentences, --file PATH, or pipe lines in")
    return _all_of(stdin)


def _all_of(stdin: TextIO) -> Iterator[list[str]]:
    text = stdin.read()
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    yield lines

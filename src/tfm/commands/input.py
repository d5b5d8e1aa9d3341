"""The lines `tfm translate` reads (its arguments, a file, stdin as the lines arrive, or lines
typed at a prompt), and the aligned files `tfm eval --src --ref` reads.

Stdin is read as a stream, in batches: a batch holds every complete line that is available
without waiting (at most `BATCH_LINES`), so a program that writes one line and waits for its
translation gets it at once, while a file or a fast producer fills whole batches, which decode
as fast as one big batch would. Lines end at b"\\n" only, a "\\r" before it and a byte order
mark at the start are dropped (as `--file` reads them); invalid UTF-8 is an error naming the
line, raised after the lines before it have been handed on.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, TextIO, cast

from tfm.data.formats import BOM, read_lines
from tfm.errors import DataError, UsageError

BATCH_LINES = 1000  # lines decoded together at most, when more are waiting
EVAL_LINES = 5_000  # lines of --src/--ref that eval encodes, decodes and scores at a time
CHUNK_BYTES = 1 << 16


STDIN_FILE = "-"  # --file -: stdin, as in every Unix tool


def translation_input(
    sentences: Sequence[str],
    file: Path | None,
    stdin: TextIO | BinaryIO,
    *,
    ask: Callable[[str], str] = input,
) -> Iterator[list[str]]:
    """Batches of lines to translate: the sentences given as arguments, else the lines of
    `file` (`BATCH_LINES` at a time; "-" is stdin), else, at a terminal, each line typed at a
    prompt (`ask`, see `typed_lines`), else stdin's lines as they arrive. Arguments and the
    file are checked and read now; stdin as the batches are taken."""
    if sentences and file is not None:
        raise UsageError("give sentences or --file, not both")
    if sentences:
        return iter([check_arguments(sentences)])
    if file is not None and str(file) != STDIN_FILE:
        lines = read_lines(file, key="--file")  # checked whole: a bad line stops it before output
        return (lines[part] for part in line_chunks(len(lines), BATCH_LINES))
    if file is None and stdin.isatty():
        return typed_lines(ask)
    return stream_batches(cast(BinaryIO, getattr(stdin, "buffer", stdin)))


def typed_lines(ask: Callable[[str], str], *, prompt: str = "> ") -> Iterator[list[str]]:
    """Each line typed at the prompt, as a batch of one, until the input ends (Ctrl-D); blank
    lines are skipped. `ask(prompt)` reads one line (`input`: with the readline module, where
    Python has it, lines are edited and earlier ones recalled with the arrow keys)."""
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (imported for its effect on input())
    while True:
        try:
            line = ask(prompt)
        except EOFError:
            return
        if line.strip():
            yield [line]


def read_aligned(src: Path, ref: Path) -> tuple[list[str], list[str]]:
    """The lines of `--src` and `--ref`, checked whole: as many in each, and at least one."""
    src_text, ref_text = read_lines(src, key="--src"), read_lines(ref, key="--ref")
    if len(src_text) != len(ref_text):
        raise DataError(
            f"{src} has {len(src_text)} lines but {ref} has {len(ref_text)}; "
            "they must be aligned line by line"
        )
    if not src_text:
        raise DataError(f"{src}: no sentences to score (the file is empty)")
    return src_text, ref_text


def line_chunks(count: int, size: int) -> Iterator[slice]:
    """Consecutive slices of at most `size` lines that cover `count` lines."""
    return (slice(start, start + size) for start in range(0, count, size))


def check_arguments(arguments: Sequence[str]) -> list[str]:
    """The arguments as given, or a UsageError naming the first (from 1) that is not valid
    UTF-8 (Python keeps such bytes of the command line as lone surrogates)."""
    for number, argument in enumerate(arguments, start=1):
        try:
            raw = argument.encode("utf-8", errors="surrogateescape")
            raw.decode("utf-8")
        except UnicodeEncodeError:  # a surrogate that no byte of argv gives
            raise UsageError(f"argument {number}: not valid UTF-8") from None
        except UnicodeDecodeError as exc:
            bad = raw[exc.start : exc.start + 4]
            raise UsageError(
                f"argument {number}: not valid UTF-8 (byte {exc.start + 1}: {bad!r})"
            ) from None
    return list(arguments)


def stream_batches(
    stream: BinaryIO, *, name: str = "stdin", max_lines: int = BATCH_LINES
) -> Iterator[list[str]]:
    """The lines of a binary stream, in batches of those available without waiting (at least
    one line, at most `max_lines`), until the stream ends."""
    lines = _LineStream(stream, name)
    while batch := lines.next_batch(max_lines):
        yield batch


class _LineStream:
    """Bytes read from a stream as they come, handed out as decoded lines."""

    def __init__(self, stream: BinaryIO, name: str) -> None:
        self.name = name
        self.read, self.ready = _readers(stream)
        self.buffer = bytearray()
        self.newlines = 0  # b"\n" in the buffer
        self.eof = False
        self.lines_out = 0  # lines handed out so far: the next line's number is this + 1
        self.error: DataError | None = None  # raised once the lines before it are handed out

    def next_batch(self, max_lines: int) -> list[str]:
        """At least one line unless the stream has ended; more if they are already there."""
        if self.error is not None:
            raise self.error
        while not self.eof and self.newlines == 0:
            self._fill()  # blocks until something arrives
        while not self.eof and self.newlines < max_lines and self.ready():
            self._fill()
        raw = self._take(max_lines)
        lines = []
        for line in raw:
            try:
                lines.append(self._decode(line))
            except DataError as exc:
                if not lines:
                    raise
                self.error = exc
                break
        return lines

    def _fill(self) -> None:
        data = self.read()
        if not data:
            self.eof = True
        self.buffer += data
        self.newlines += data.count(b"\n")

    def _take(self, max_lines: int) -> list[bytes]:
        lines, start = [], 0
        for _ in range(min(self.newlines, max_lines)):
            end = self.buffer.index(b"\n", start)
            lines.append(bytes(self.buffer[start:end]))
            start = end + 1
        del self.buffer[:start]
        self.newlines -= len(lines)
        if self.eof and not self.newlines and self.buffer and len(lines) < max_lines:
            lines.append(bytes(self.buffer))  # the last line, without a newline
            self.buffer.clear()
        return lines

    def _decode(self, line: bytes) -> str:
        number = self.lines_out + 1
        if number == 1 and line.startswith(BOM):
            line = line[len(BOM) :]
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = line[exc.start : exc.start + 4]
            raise DataError(
                f"{self.name}:{number}: not valid UTF-8 (byte {exc.start + 1} of the line: "
                f"{bad!r}); expected UTF-8 text"
            ) from None
        self.lines_out = number
        return text[:-1] if text.endswith("\r") else text


def _readers(stream: BinaryIO) -> tuple[Callable[[], bytes], Callable[[], bool]]:
    """(read what is there, up to a chunk; whether reading now would not wait). A stream with
    a file descriptor is read with os.read and polled with select; another (an in-memory one)
    always has its data ready."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        read = getattr(stream, "read1", stream.read)
        return (lambda: read(CHUNK_BYTES)), (lambda: True)
    return (lambda: os.read(fd, CHUNK_BYTES)), (lambda: bool(select.select([fd], [], [], 0)[0]))

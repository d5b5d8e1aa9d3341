"""The lines `tfm translate` reads: stdin in batches of what is already there, line endings and
byte order mark as `--file` reads them, invalid UTF-8 named by line (stdin) or by argument."""

import io
import os
import threading

import pytest

from tfm.commands.input import check_arguments, stream_batches
from tfm.errors import DataError, UsageError


def within(seconds: float, action):
    """`action()`'s result, or a test failure if it takes longer (it waited for input)."""
    box = []
    worker = threading.Thread(target=lambda: box.append(action()), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"waited more than {seconds} s for input that is not coming")
    return box[0]


@pytest.fixture
def pipe():
    """(reading end as a binary file, writing end's file descriptor) of an OS pipe."""
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "rb", buffering=0)
    yield reader, write_fd
    reader.close()
    try:
        os.close(write_fd)
    except OSError:
        pass  # closed by the test


def test_input_that_is_all_there_comes_in_full_batches(pipe):
    reader, writer = pipe
    os.write(writer, b"".join(b"line %d\n" % i for i in range(1, 8)))
    os.close(writer)
    batches = list(stream_batches(reader, max_lines=3))
    assert batches == [["line 1", "line 2", "line 3"], ["line 4", "line 5", "line 6"], ["line 7"]]


def test_a_batch_holds_what_has_arrived_and_does_not_wait_for_more(pipe):
    reader, writer = pipe
    batches = stream_batches(reader, max_lines=100)
    os.write(writer, b"first\nsecond\nthi")  # a line and a half more are still to come
    assert within(10, lambda: next(batches)) == ["first", "second"]
    os.write(writer, b"rd\n")
    assert within(10, lambda: next(batches)) == ["third"]
    os.write(writer, b"last, without a newline")
    os.close(writer)
    assert within(10, lambda: list(batches)) == [["last, without a newline"]]


def test_line_endings_and_byte_order_mark_as_files_read_them():
    stream = io.BytesIO("\ufeffone\r\ntwo\u2028still two\n\nfour\rx\n".encode("utf-8"))
    assert list(stream_batches(stream)) == [["one", "two\u2028still two", "", "four\rx"]]
    assert list(stream_batches(io.BytesIO(b""))) == []
    assert list(stream_batches(io.BytesIO(b"\n"))) == [[""]]


def test_invalid_utf8_comes_after_the_lines_before_it_and_names_its_line(pipe):
    reader, writer = pipe
    os.write(writer, b"fine\nstill fine \xc3\xbc\nbad \xff here\nnever read\n")
    os.close(writer)
    batches = stream_batches(reader)
    assert next(batches) == ["fine", "still fine ü"]
    with pytest.raises(DataError, match=r"^stdin:3: not valid UTF-8 \(byte 5 of the line: "):
        next(batches)


def test_arguments_that_are_not_utf8_are_named_by_position():
    assert check_arguments(["a dog", "ein Hund läuft"]) == ["a dog", "ein Hund läuft"]
    bad = b"caf\xe9".decode("utf-8", errors="surrogateescape")  # as Python keeps argv bytes
    with pytest.raises(UsageError, match=r"^argument 2: not valid UTF-8 \(byte 4: b'\\xe9'\)$"):
        check_arguments(["fine", bad, "also fine"])

"""Streaming corpus files (`formats.iter_lines` and the pair streams): the lines, errors and
counts of reading a file whole, whatever the block size."""

import pytest

from tfm.config import SourceConfig, ToyConfig
from tfm.data.corpus import stream_split
from tfm.data.formats import iter_lines, text_pairs
from tfm.errors import DataError

TRICKY = "\ufeffGrüße\r\nzwei\rdrei\n\n日本語 \u2028 x\r\n\r\nletzte ohne Zeilenende\r".encode()


def whole(data: bytes) -> list[str]:
    """The lines as reading the whole file gives them (the formats docstring's rules)."""
    text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


@pytest.mark.parametrize("block_size", [4, 5, 7, 16, 1 << 22])
@pytest.mark.parametrize("ending", [b"", b"\n", b"\r\n"])
def test_lines_are_those_of_the_whole_file_at_any_block_size(tmp_path, block_size, ending):
    path = tmp_path / "x.de"
    path.write_bytes(TRICKY + ending)
    assert list(iter_lines(path, key="k", block_size=block_size)) == whole(TRICKY + ending)


@pytest.mark.parametrize("block_size", [4, 6, 1 << 22])
def test_invalid_utf8_names_the_line_and_byte_in_any_block(tmp_path, block_size):
    path = tmp_path / "x.de"
    path.write_bytes(b"\xef\xbb\xbfab\xff\nok\nline three \xc3(\n")
    with pytest.raises(DataError, match=r"x.de:1: invalid UTF-8 at byte 6 of the line"):
        list(iter_lines(path, key="k", block_size=block_size))
    path.write_bytes(b"ab\nok\nline three \xc3(\n")
    with pytest.raises(DataError, match=r"x.de:3: invalid UTF-8 at byte 12 of the line"):
        list(iter_lines(path, key="k", block_size=block_size))


@pytest.mark.parametrize(("de", "en"), [(b"a\nb\nc\n", b"A\n"), (b"a\n", b"A\nB\nC\n")])
def test_files_of_different_lengths_are_counted_to_the_end(tmp_path, de, en):
    (tmp_path / "t.de").write_bytes(de)
    (tmp_path / "t.en").write_bytes(en)
    stream = text_pairs(str(tmp_path / "t"), src_lang="de", tgt_lang="en", key="data.train")
    n_de, n_en = de.count(b"\n"), en.count(b"\n")
    with pytest.raises(DataError, match=rf"t.de has {n_de} lines but .*t.en has {n_en};"):
        list(stream.pairs)


def test_a_stream_yields_cleaned_pairs_and_reports_after_the_last(tmp_path):
    (tmp_path / "t.de").write_bytes(b" a \n\nb\n")
    (tmp_path / "t.en").write_bytes(b"A\nB\n\tB2 \n")
    source = SourceConfig(format="text", path=str(tmp_path / "t"))
    pairs, cleaner = stream_split(source, split="train", src_lang="de", tgt_lang="en",
                                  toy=ToyConfig())  # fmt: skip
    assert list(pairs) == [[("a", "A"), ("b", "B2")]]  # one chunk of what is kept
    report = cleaner.report()
    assert (report.read, report.kept, report.dropped) == (3, 2, {"empty": 1})

"""Ragged sequences (`tfm.data.ragged`): flat arrays that behave as the lists they replace, and
the batch sampler that reads their lengths."""

import random
from pathlib import Path

import numpy as np
import pytest

from tfm.data.batching import TokenBatchSampler
from tfm.data.cache.entry_encoding import frame
from tfm.data.ragged import Joined, RaggedIds, RaggedText, Reframed, id_dtype, lengths_of

ROWS = [[5, 6, 2], [2], [9, 8, 7, 6, 2], [4, 2]]


def write(stem, rows, dtype):
    """Files as the cache writes them: raw values, and offsets in .npy."""
    flat = np.array([i for r in rows for i in r], dtype=dtype)
    flat.tofile(f"{stem}.ids")
    np.save(f"{stem}.ids-offsets.npy", np.cumsum([0, *map(len, rows)]).astype(np.int64))


@pytest.mark.parametrize(
    ("vocab_size", "dtype"),
    [(64, np.uint8), (256, np.uint8), (257, np.uint16), (65_536, np.uint16), (65_537, np.uint32)],
)
def test_ids_take_the_smallest_type_that_holds_the_vocabulary(vocab_size, dtype):
    assert id_dtype(vocab_size) == np.dtype(dtype)


def test_mapped_ids_behave_as_the_list_of_lists(tmp_path):
    write(tmp_path / "src", ROWS, np.uint16)
    ids = RaggedIds.open(tmp_path / "src", np.dtype(np.uint16))
    assert ids.mapping is not None and not ids.values.flags.writeable  # a read-only map
    assert len(ids) == 4 and ids[2] == [9, 8, 7, 6, 2] and ids[-1] == [4, 2]
    assert all(type(i) is int for i in ids[0])  # plain ints, as collate and json expect
    assert list(ids) == ROWS and ids == ROWS and ids[1:3] == ROWS[1:3]
    assert ids.lengths.tolist() == [3, 1, 5, 2]
    with pytest.raises(IndexError, match="row 4 of 4"):
        ids[4]
    kept = ids.subset(np.array([3, 0]))
    assert kept == [ROWS[3], ROWS[0]] and kept.lengths.tolist() == [2, 3]
    assert list(kept.subset(np.array([1]))) == [ROWS[0]]


def test_iteration_reads_in_blocks_and_agrees_with_indexing():
    rows = [[i % 7] * (i % 5 + 1) for i in range(10_000)]  # more rows than one block
    ids = RaggedIds.from_rows(rows, dtype=np.uint8)
    assert list(ids) == rows and [ids[i] for i in (0, 4095, 4096, 9999)] == [
        rows[i] for i in (0, 4095, 4096, 9999)
    ]


def test_text_rows_are_the_sentences(tmp_path):
    sentences = ["Grüße ▁ aus Köln", "", "日本語", "a\u2028b"]
    data = [s.encode() for s in sentences]
    (tmp_path / "src.text").write_bytes(b"".join(data))
    np.save(tmp_path / "src.text-offsets.npy", np.cumsum([0, *map(len, data)]).astype(np.int64))
    texts = RaggedText.open(tmp_path / "src")
    assert list(texts) == sentences and texts[2] == "日本語" and texts == sentences
    assert list(texts.subset(np.array([3, 0]))) == [sentences[3], sentences[0]]


def test_offsets_must_end_at_the_values():
    with pytest.raises(ValueError, match=r"end at the number of values \(3\), got 2"):
        RaggedIds(values=np.zeros(3, dtype=np.uint8), offsets=np.array([0, 2]))


def test_joined_and_reframed_views_equal_the_lists_they_stand_for():
    src, tgt = RaggedIds.from_rows(ROWS), [[1, *r] for r in ROWS]
    both = Joined(src, Reframed(tgt, drop=1))
    assert both == ROWS + [t[1:] for t in tgt]
    assert both.lengths.tolist() == [len(r) for r in ROWS + ROWS]
    assert src + tgt == ROWS + tgt and tgt + src == tgt + ROWS  # `+` as on lists, as a view
    assert isinstance(tgt + src, Joined) and (src + src).lengths.tolist() == 2 * [3, 1, 5, 2]
    framed = Reframed(src, prefix=[1])
    assert framed == [[1, *r] for r in ROWS] and lengths_of(framed).tolist() == [4, 2, 6, 3]


def test_framing_matches_the_pipeline():
    flat, lengths = np.array([7, 8, 9, 5], dtype=np.uint16), np.array([3, 0, 1])
    values, framed = frame(flat, lengths, bos=False)
    assert values.tolist() == [7, 8, 9, 2, 2, 5, 2] and framed.tolist() == [4, 1, 2]
    values, framed = frame(flat, lengths, bos=True)
    assert values.tolist() == [1, 7, 8, 9, 2, 1, 2, 1, 5, 2] and framed.tolist() == [5, 2, 3]


def reference_order(src, tgt):
    """The sampler's order as a sort with Python keys: by width, then source length, then index."""
    widths = [max(s, t) for s, t in zip(src, tgt, strict=True)]
    return sorted(range(len(src)), key=lambda i: (widths[i], src[i]))


def test_sampler_on_arrays_gives_the_batches_of_the_lists():
    rng = random.Random(3)
    src = [rng.randint(1, 40) for _ in range(3000)]
    tgt = [rng.randint(1, 40) for _ in range(3000)]
    from_lists = TokenBatchSampler(src, tgt, max_tokens=300, seed=5)
    from_arrays = TokenBatchSampler(np.array(src), np.array(tgt), max_tokens=300, seed=5)
    order = reference_order(src, tgt)
    assert from_lists._order == order
    keys = [(max(src[i], tgt[i]), src[i]) for i in order]  # shuffled within equal keys
    starts = [k for k in range(len(keys)) if k == 0 or keys[k] != keys[k - 1]]
    assert [start for start, _ in from_arrays._groups] == starts
    for epoch in (0, 1):
        assert from_arrays.epoch(epoch) == from_lists.epoch(epoch)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_full_pass_gives_the_mapped_pages_back(tmp_path):
    text = "x" * 200
    (tmp_path / "big.text").write_bytes(text.encode() * 200_000)  # 40 MB
    offsets = np.arange(0, 200_001, dtype=np.int64) * 200
    np.save(tmp_path / "big.text-offsets.npy", offsets)
    texts = RaggedText.open(tmp_path / "big")
    before = file_rss_mib()
    assert all(row == text for row in texts)
    assert file_rss_mib() - before < 8  # without giving pages back: 40 MB more
    assert texts[199_999] == text  # and rows can still be read after


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_reading_in_chunks_gives_the_mapped_pages_back(tmp_path):
    lengths = np.random.default_rng(0).integers(20, 400, size=200_000)
    rows = ["".join(chr(97 + i % 26) * n) for i, n in enumerate(lengths)]
    (tmp_path / "big.text").write_text("".join(rows), encoding="utf-8")  # 42 MB
    np.save(tmp_path / "big.text-offsets.npy", np.concatenate([[0], np.cumsum(lengths)]))
    texts = RaggedText.open(tmp_path / "big")
    before = file_rss_mib()
    for start in range(0, 200_000, 3_001):
        assert texts.read(start, start + 3_001) == rows[start : start + 3_001]
    assert file_rss_mib() - before < 8  # pages mapped around each block's first are given back
    with pytest.raises(ValueError, match="for all rows"):
        texts.subset(np.arange(5)).read(0, 5)
    sample = texts.subset(np.arange(0, 200_000, 50))  # a row on every page or two
    assert list(sample) == rows[::50] and file_rss_mib() - before > 30
    texts.release()
    assert file_rss_mib() - before < 8 and texts[12_345] == rows[12_345]


def file_rss_mib() -> float:
    """The process's resident memory backed by files (mapped pages), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssFile in /proc/self/status")

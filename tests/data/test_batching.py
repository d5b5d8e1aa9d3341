"""Batching behaviour: budget, coverage, determinism per (seed, epoch), padding, collate shapes."""

import random
from pathlib import Path

import pytest
import torch

from tfm.data.batching import (
    Batch,
    TokenBatchSampler,
    collate,
    inference_batches,
    padding_share,
    token_counts,
)

MULTI30K = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"


def multi30k_like_lengths(n: int = 29_000, seed: int = 0) -> tuple[list[int], list[int]]:
    """Framed lengths shaped like Multi30k's BPE lengths: mean about 16, tails to about 50."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        words = max(2, round(rng.lognormvariate(2.5, 0.35)))
        src.append(words + rng.randint(0, 4) + 1)
        tgt.append(max(3, words + rng.randint(-3, 3) + 2))
    return src, tgt


def width(src: list[int], tgt: list[int], batch: list[int]) -> int:
    return max(max(src[i], tgt[i]) for i in batch)


@pytest.fixture(scope="module")
def lengths() -> tuple[list[int], list[int]]:
    return multi30k_like_lengths()


def test_budget_is_never_exceeded_and_every_index_appears_once(lengths) -> None:
    src, tgt = lengths
    sampler = TokenBatchSampler(src, tgt, max_tokens=4000, seed=1)
    for epoch in range(3):
        batches = sampler.epoch(epoch)
        assert all(len(b) * width(src, tgt, b) <= 4000 for b in batches)
        assert sorted(i for b in batches for i in b) == list(range(len(src)))
        assert len(batches) == len(sampler)


def test_same_seed_and_epoch_give_the_same_batches(lengths) -> None:
    src, tgt = lengths
    first = TokenBatchSampler(src, tgt, max_tokens=4000, seed=7).epoch(3)
    again = TokenBatchSampler(src, tgt, max_tokens=4000, seed=7).epoch(3)
    assert first == again
    # Resuming inside an epoch is by index: the rest of the same list.
    assert again[10:] == first[10:]


def test_other_epoch_or_seed_changes_order_and_composition(lengths) -> None:
    src, tgt = lengths
    sampler = TokenBatchSampler(src, tgt, max_tokens=4000, seed=7)
    e0, e1 = sampler.epoch(0), sampler.epoch(1)
    assert e0 != e1
    assert {frozenset(b) for b in e0} != {frozenset(b) for b in e1}
    assert TokenBatchSampler(src, tgt, max_tokens=4000, seed=8).epoch(0) != e0


def test_without_shuffle_every_epoch_is_the_same_length_sorted_list(lengths) -> None:
    src, tgt = lengths
    sampler = TokenBatchSampler(src, tgt, max_tokens=4000, seed=7, shuffle=False)
    batches = sampler.epoch(0)
    assert sampler.epoch(5) == batches
    widths = [width(src, tgt, b) for b in batches]
    assert widths == sorted(widths)


def test_padding_share_is_high(lengths) -> None:
    src, tgt = lengths
    batches = TokenBatchSampler(src, tgt, max_tokens=4000, seed=0).epoch(0)
    assert padding_share(src, tgt, batches) >= 0.9


def test_padding_share_counts_both_padded_sides() -> None:
    # batch [0, 1]: src 2 x 3 = 6 slots (5 real), tgt 2 x 4 = 8 slots (6 real)
    assert padding_share([3, 2], [4, 2], [[0, 1]]) == pytest.approx(11 / 14)
    assert token_counts([3, 2], [4, 2], [0, 1]) == (11, 14)  # real, padded: what the share divides
    assert token_counts([3, 2], [4, 2], [1]) == (4, 4)  # one pair: no padding


def test_example_longer_than_the_budget_gets_a_batch_of_its_own(caplog) -> None:
    src, tgt = [5, 5, 50, 5, 60], [5, 5, 5, 5, 5]
    batches = TokenBatchSampler(src, tgt, max_tokens=20, seed=0).epoch(0)
    assert [2] in batches and [4] in batches
    assert sorted(i for b in batches for i in b) == [0, 1, 2, 3, 4]
    assert "longer than max_tokens=20" in caplog.text


def test_sampler_refuses_mismatched_lengths_and_bad_budget() -> None:
    with pytest.raises(ValueError, match="3 source lengths but 2 target lengths"):
        TokenBatchSampler([1, 2, 3], [1, 2], max_tokens=10, seed=0)
    with pytest.raises(ValueError, match="max_tokens=0"):
        TokenBatchSampler([1], [1], max_tokens=0, seed=0)


def test_collate_pads_and_shifts_the_target() -> None:
    batch = collate([[5, 6, 2], [7, 2]], [[1, 8, 9, 2], [1, 2]], pad_id=0)
    assert batch.src.tolist() == [[5, 6, 2], [7, 2, 0]]
    assert batch.tgt_in.tolist() == [[1, 8, 9], [1, 2, 0]]
    assert batch.tgt_out.tolist() == [[8, 9, 2], [2, 0, 0]]
    assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long
    assert (batch.n_src_tokens, batch.n_tgt_tokens) == (5, 4)
    assert batch.n_tgt_tokens == int((batch.tgt_out != 0).sum())


def test_collate_uses_the_given_pad_id_and_batch_moves() -> None:
    batch = collate([[4], [4, 4]], [[1, 2], [1, 5, 2]], pad_id=9)
    assert batch.src.tolist() == [[4, 9], [4, 4]]
    assert batch.tgt_out.tolist() == [[2, 9], [5, 2]]
    moved = batch.to("cpu")
    assert isinstance(moved, Batch) and torch.equal(moved.tgt_in, batch.tgt_in)


def test_collate_refuses_empty_or_unframed_input() -> None:
    with pytest.raises(ValueError, match="0 and 0"):
        collate([], [])
    with pytest.raises(ValueError, match="tgt of length >= 2"):
        collate([[4, 2]], [[2]])


def test_inference_batches_cover_every_index_once_longest_first() -> None:
    lengths = multi30k_like_lengths(1000, seed=3)[0] + [500]
    batches = inference_batches(lengths, max_tokens=300)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert batches[0] == [len(lengths) - 1]  # too long for the budget: alone
    assert all(len(b) * max(lengths[i] for i in b) <= 300 for b in batches[1:])
    longest = [max(lengths[i] for i in b) for b in batches]
    assert longest == sorted(longest, reverse=True)
    assert inference_batches([], max_tokens=10) == []


def read_lines(name: str) -> list[str]:
    path = MULTI30K / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.slow  # reads the real corpus; the tests above check the share on Multi30k-like lengths
def test_multi30k_train_padding_share_with_real_bpe_lengths() -> None:
    from tfm.data.tokenizer import train_tokenizer

    src_text, tgt_text = read_lines("train.de"), read_lines("train.en")
    # BPE learnt on 3k pairs (fast) but applied to all 29k, framed as the pipeline frames them.
    tok = train_tokenizer(src_text[:3000], tgt_text[:3000], vocab_size=8000)
    src = [len(ids) + 1 for ids in tok.encode_src(src_text)]
    tgt = [len(ids) + 2 for ids in tok.encode_tgt(tgt_text)]
    sampler = TokenBatchSampler(src, tgt, max_tokens=4000, seed=0)
    assert padding_share(src, tgt, sampler.epoch(0)) >= 0.9

"""The epoch plan: the split's own batches without transforms, transforms in list order in the
epochs they are active in, batch counts for the progress total, and a new transform trained on
through the plan alone."""

import pytest
from builders import tiny_config

from tfm.data.batching import Pairs
from tfm.data.bidirectional import BothDirections
from tfm.data.epochs import EpochPlan
from tfm.data.pipeline import EncodedSplit
from tfm.training import train


def split(n: int = 40) -> EncodedSplit:
    """n framed pairs of lengths 2..9 (no text: no transform here reads it)."""
    src = [[5 + i % 7] * (1 + i % 8) + [2] for i in range(n)]
    tgt = [[1, *[6 + i % 5] * (1 + (i * 3) % 8), 2] for i in range(n)]
    return EncodedSplit("train", [""] * n, [""] * n, src, tgt, report=None)


class Doubled:
    """A test transform: every pair twice, in the epochs listed."""

    def __init__(self, epochs: set[int]) -> None:
        self.epochs, self.seen = epochs, []

    def active(self, epoch: int) -> bool:
        return epoch in self.epochs

    def __call__(self, pairs: Pairs, epoch: int) -> Pairs:
        self.seen.append((epoch, len(pairs.src)))
        return Pairs(src=pairs.src + pairs.src, tgt=pairs.tgt + pairs.tgt)

    def describe(self, before: Pairs, after: Pairs, epoch: int) -> str:
        return f"doubled to {len(after.src)} pairs"


class Shrinking(Doubled):
    """A test transform whose pairs (and so batches) change from epoch to epoch."""

    def __call__(self, pairs: Pairs, epoch: int) -> Pairs:
        return Pairs(src=pairs.src[: 40 - 8 * epoch], tgt=pairs.tgt[: 40 - 8 * epoch])


def test_without_transforms_an_epoch_is_the_split_batched_by_the_sampler():
    data = split()
    plan = EpochPlan(data, max_tokens=30, seed=3)
    for epoch in (0, 1):
        assert plan.data(epoch).src is data.src and plan.data(epoch).tgt is data.tgt
        assert plan.data(epoch).batches == plan.sampler.epoch(epoch)
    assert plan.data(0).batches != plan.data(1).batches


def test_transforms_apply_in_list_order_in_the_epochs_they_are_active_in():
    first, second = Doubled({0, 1}), Doubled({1, 2})
    plan = EpochPlan(split(), max_tokens=30, seed=3, transforms=[first, second])
    sizes = [len(plan.data(epoch).src) for epoch in range(4)]
    assert sizes == [80, 160, 80, 40]
    assert first.seen == [(0, 40), (1, 40)] and second.seen == [(1, 80), (2, 40)]
    for epoch in range(4):
        batches = plan.data(epoch).batches
        assert sorted(i for batch in batches for i in batch) == list(range(sizes[epoch]))
    again = EpochPlan(split(), max_tokens=30, seed=3, transforms=[Doubled({0, 1}), second])
    assert again.data(1).batches == plan.data(1).batches  # a pure function of seed and epoch
    other = EpochPlan(split(), max_tokens=30, seed=4, transforms=[Doubled({0, 1}), second])
    assert other.data(1).batches != plan.data(1).batches


def test_batch_counts_are_exact_where_lengths_stay_and_built_near_last():
    plan = EpochPlan(split(), max_tokens=30, seed=3, transforms=[BothDirections(epochs=2)])
    counts = plan.batch_counts(range(5), near=1)
    assert counts == [len(plan.data(epoch).batches) for epoch in range(5)]
    assert counts[0] > counts[2] == len(plan.sampler)
    for near in (1, 3):  # the epoch training goes on in is built last, for the loop to keep
        transforms = [Doubled(set(range(5))), BothDirections(epochs=2)]
        plan = EpochPlan(split(), max_tokens=30, seed=3, transforms=transforms)
        plan.batch_counts(range(5), near=near)
        assert plan._last[0] == near


@pytest.mark.parametrize(("near", "standing"), [(0, 0), (2, 2), (9, 3)])
def test_a_changing_transform_counts_one_epoch_for_all(near, standing):
    plan = EpochPlan(split(), max_tokens=30, seed=3, transforms=[Shrinking(set(range(4)))])
    counts = plan.batch_counts(range(4), near=near)
    assert counts == [len(plan.data(standing).batches)] * 4
    assert len(plan.data(0).batches) > len(plan.data(3).batches)  # they do differ


def test_the_loop_trains_a_new_transform_through_the_plan_alone(
    tmp_path, monkeypatch, progress_totals
):
    built = []
    plain_plan = EpochPlan.from_config

    def with_doubled_epoch(config, split):
        plan = plain_plan(config, split)
        plan.transforms.append(Doubled({0}))
        built.append(plan)
        return plan

    monkeypatch.setattr(EpochPlan, "from_config", with_doubled_epoch)
    result = train(tiny_config(tmp_path / "run", max_epochs=2), progress_bar=False)
    plan = built[0]
    plain = len(plan.sampler)
    assert result.steps == len(plan.data(0).batches) + plain > 2 * plain
    assert progress_totals == [result.steps]

"""Bidirectional training (`train.bidirectional_epochs`): the early epochs train on every pair and
its reverse, later ones on the pairs alone; batches, the progress total and resume stay exact."""

import pytest
import torch
from builders import tiny_config, train_losses

from tfm.config import load_config
from tfm.data import batching
from tfm.data.batching import collate
from tfm.data.bidirectional import BothDirections
from tfm.data.epochs import EpochPlan
from tfm.data.tokenizer import BOS_ID, EOS_ID
from tfm.errors import ConfigError, UsageError
from tfm.training import train
from tfm.training.session_opening import open_session as open_new_session


def session_for(config, resume=False):
    return open_new_session(config, resume=resume, overwrite=False)


def pairs(data) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return sorted(zip(map(tuple, data.src), map(tuple, data.tgt), strict=True))


def reversed_pairs(split) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each pair as target → source, framed as training frames a pair."""
    return sorted((tuple(t[1:]), (BOS_ID, *s)) for s, t in zip(split.src, split.tgt, strict=True))


def test_an_epoch_holds_every_pair_and_its_reverse_once(tmp_path):
    session = session_for(tiny_config(tmp_path / "run", bidirectional_epochs=2), resume=False)
    split, tokenizer = session.train_split, session.tokenizer
    data = session.epochs.data(0)
    n = len(split)
    assert data.src[:n] == split.src and data.tgt[:n] == split.tgt
    # the reverse's source is the German text, its target the English, framed as usual
    assert tokenizer.decode_src(data.src[n:]) == tokenizer.decode_tgt(split.tgt)
    assert tokenizer.decode_tgt(data.tgt[n:]) == tokenizer.decode_src(split.src)
    assert all(s[-1] == EOS_ID and s[0] != BOS_ID for s in data.src)
    assert all(t[0] == BOS_ID and t[-1] == EOS_ID for t in data.tgt)
    assert sorted(i for batch in data.batches for i in batch) == list(range(2 * n))
    for batch in data.batches:
        width = max(max(len(data.src[i]), len(data.tgt[i])) for i in batch)
        assert len(batch) * width <= 800 or len(batch) == 1
    assert len(data.batches) > len(session.epochs.sampler)


def test_later_epochs_are_the_pairs_alone_and_epochs_are_seeded(tmp_path):
    session = session_for(tiny_config(tmp_path / "run", bidirectional_epochs=2), resume=False)
    again = session_for(tiny_config(tmp_path / "again", bidirectional_epochs=2), resume=False)
    e0, e1, e2 = (session.epochs.data(e) for e in range(3))
    assert e0.batches == again.epochs.data(0).batches
    assert e0.batches != e1.batches and pairs(e0) == pairs(e1)  # same data, a new order
    assert e2.src is session.train_split.src and e2.batches == session.epochs.sampler.epoch(2)


def test_training_batches_both_directions_then_one(tmp_path, monkeypatch, progress_totals):
    seen = []

    def recording_collate(src, tgt, *args, **kwargs):
        seen.extend(zip(map(tuple, src), map(tuple, tgt), strict=True))
        return collate(src, tgt, *args, **kwargs)

    monkeypatch.setattr(batching, "collate", recording_collate)
    config = tiny_config(tmp_path / "run", bidirectional_epochs=2, max_epochs=3)
    result = train(config, progress_bar=False)
    split = session_for(tiny_config(tmp_path / "probe"), resume=False).train_split
    forward = pairs(split)
    assert sorted(seen) == sorted(3 * forward + 2 * reversed_pairs(split))
    assert result.stopped_because == "max_epochs"
    assert progress_totals == [result.steps]  # the bar's total counts the longer epochs


def losses(run_dir) -> list[float]:
    return [loss for _, loss in train_losses(run_dir)]


def test_resume_inside_a_bidirectional_epoch_is_bit_identical(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    probe = session_for(tiny_config(tmp_path / "probe", bidirectional_epochs=2), resume=False)
    n_batches = len(probe.epochs.data(0).batches)
    end = 2 * n_batches + 3  # into the first one-direction epoch
    train(tiny_config(straight, bidirectional_epochs=2, max_steps=end), progress_bar=False)
    train(tiny_config(resumed, bidirectional_epochs=2, max_steps=n_batches + 2),
          progress_bar=False)  # fmt: skip
    train(tiny_config(resumed, bidirectional_epochs=2, max_steps=end), resume=True,
          progress_bar=False)  # fmt: skip
    assert losses(resumed) == losses(straight)
    a = torch.load(straight / "last.pt", weights_only=False)["model"]
    b = torch.load(resumed / "last.pt", weights_only=False)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_both_directions_is_a_pure_function_of_seed_and_epoch(tmp_path):
    split = session_for(tiny_config(tmp_path / "run"), resume=False).train_split

    def epoch_4(seed: int) -> list[list[int]]:
        transforms = [BothDirections(epochs=5)]
        return EpochPlan(split, max_tokens=800, seed=seed, transforms=transforms).data(4).batches

    assert epoch_4(1) == epoch_4(1)
    assert epoch_4(2) != epoch_4(1)


def test_config_refuses_separate_vocabularies():
    with pytest.raises(ConfigError, match=r"train\.bidirectional_epochs needs tokenizer\.joint"):
        load_config(
            None,
            ["train.bidirectional_epochs=3", "tokenizer.joint=false",
             "model.share_embeddings=false"],
        )  # fmt: skip


def test_resume_refuses_a_count_that_changes_a_begun_epoch(tmp_path):
    run = tmp_path / "run"
    probe = session_for(tiny_config(tmp_path / "probe", bidirectional_epochs=3), resume=False)
    inside_second = len(probe.epochs.data(0).batches) + 2  # epochs 0 and 1 begun
    train(tiny_config(run, bidirectional_epochs=3, max_steps=inside_second), progress_bar=False)
    for fewer in (1, 0):  # epoch 1, or 0 and 1, trained both ways would become one-way
        with pytest.raises(
            UsageError,
            match=r"train\.bidirectional_epochs differs from the run's; change only budgets .*, "
            r"train\.bidirectional_epochs to no fewer than the 2 epoch\(s\) begun or start",
        ):
            train(tiny_config(run, bidirectional_epochs=fewer, max_steps=inside_second + 2),
                  resume=True, progress_bar=False)  # fmt: skip
    result = train(tiny_config(run, bidirectional_epochs=2, max_steps=inside_second + 2),
                   resume=True, progress_bar=False)  # fmt: skip
    assert result.steps == inside_second + 2


@pytest.mark.parametrize(("first", "then"), [(5, 2), (2, 3)])
def test_a_count_changed_on_resume_trains_as_if_set_from_the_start(tmp_path, first, then):
    """Ending both-ways training early (5 → 2) or later (2 → 3) inside epoch 1 gives the run that
    had the new count all along, bit for bit: the epochs begun are the same under both."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    probe = session_for(tiny_config(tmp_path / "probe", bidirectional_epochs=2), resume=False)
    n_batches = len(probe.epochs.data(0).batches)
    end = 3 * n_batches  # well into epoch 2, both ways or one way depending on the count
    train(tiny_config(straight, bidirectional_epochs=then, max_steps=end), progress_bar=False)
    train(tiny_config(resumed, bidirectional_epochs=first, max_steps=n_batches + 2),
          progress_bar=False)  # fmt: skip
    train(tiny_config(resumed, bidirectional_epochs=then, max_steps=end), resume=True,
          progress_bar=False)  # fmt: skip
    assert losses(resumed) == losses(straight)
    assert load_config(resumed / "config.yaml").train.bidirectional_epochs == then  # as trained
    # The count matters from epoch 2 on: had the first count gone on, the run would differ.
    unchanged = tmp_path / "unchanged"
    train(tiny_config(unchanged, bidirectional_epochs=first, max_steps=end), progress_bar=False)
    assert losses(unchanged)[: n_batches + 2] == losses(straight)[: n_batches + 2]
    assert losses(unchanged) != losses(straight)

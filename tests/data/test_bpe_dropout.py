"""BPE-dropout (`tokenizer.bpe_dropout`): plain BPE at p = 0, the skip rate at p > 0, the same text
whatever the segmentation, seeded epochs, limits kept, and exact resume inside an epoch."""

import json
import random

import pytest
import torch
from builders import WIDER, tiny_config, train_losses
from test_tokenizer import DE, EN

from tfm.config import load_config
from tfm.data import batching
from tfm.data.batching import TokenBatchSampler, collate
from tfm.data.bpe_dropout import BpeDropout, DropoutSegmenter
from tfm.data.epochs import EpochPlan
from tfm.data.pipeline import prepare_splits
from tfm.data.tokenizer import BOS_ID, EOS_ID, UNK_ID, train_tokenizer
from tfm.data.toy.generator import generate
from tfm.errors import ConfigError
from tfm.training import train
from tfm.training.session_opening import open_session


@pytest.fixture(scope="module")
def toy_texts():
    pairs = generate(n_train=600, n_validation=0, n_test=0, seed=3)["train"]
    return [en for en, _ in pairs], [de for _, de in pairs]


@pytest.mark.parametrize("joint", [True, False])
def test_p0_gives_the_ids_of_tokenizers_bpe(toy_texts, joint):
    src, tgt = toy_texts
    tok = train_tokenizer(src + EN, tgt + DE, vocab_size=300, joint=joint)
    src_model, tgt_model = tok.bpe_models
    unseen = ["a ☃☃ b ☃ c☃d", "\t Zwei  Männer\u00a0(5)…  ", ""]
    for texts, model, encode in ((src + EN, src_model, tok.encode_src),
                                 (tgt + DE, tgt_model, tok.encode_tgt)):  # fmt: skip
        segmenter = DropoutSegmenter(model)
        ours = segmenter.encode(segmenter.words(texts + unseen), 0.0, random.Random(0))
        assert ours == encode(texts + unseen)
    assert UNK_ID in ours[-3]  # the unseen characters were exercised


def one_merge_segmenter() -> DropoutSegmenter:
    """A BPE whose only merge is ("a", "b"): "ab" is one piece, or two when the merge is skipped."""
    tok = train_tokenizer(["ab ab ab"], ["ab"], vocab_size=8, min_frequency=1)
    model = json.loads(tok.bpe_models[0].to_str())["model"]
    assert [tuple(m.split()) if isinstance(m, str) else tuple(m) for m in model["merges"]] == [
        ("a", "b")
    ]
    return DropoutSegmenter(tok.bpe_models[0])


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_each_merge_is_skipped_with_probability_p(p):
    segmenter = one_merge_segmenter()
    n = 4000
    ids = segmenter.encode(segmenter.words(["ab"] * n), p, random.Random(1))
    unmerged = sum(len(seq) == 3 for seq in ids) / n  # "▁", "a", "b" instead of "▁", "ab"
    assert all(len(seq) in (2, 3) for seq in ids)
    assert unmerged == pytest.approx(p, abs=4 * (p * (1 - p) / n) ** 0.5)


def test_any_segmentation_decodes_to_the_same_text():
    tok = train_tokenizer(EN * 20, DE * 20, vocab_size=400)
    segmenter = DropoutSegmenter(tok.bpe_models[0])
    plain = tok.encode_src(EN + DE)
    rng = random.Random(2)
    for p in (0.1, 0.5, 0.9):
        dropped = segmenter.encode(segmenter.words(EN + DE), p, rng)
        assert tok.decode_src(dropped) == tok.decode_src(plain)
        assert sum(map(len, dropped)) > sum(map(len, plain))  # smaller pieces, more of them
        assert UNK_ID not in {i for seq in dropped for i in seq}


def test_p_out_of_range_is_refused():
    segmenter = one_merge_segmenter()
    with pytest.raises(ValueError, match=r"p=1.0 is not in \[0, 1\)"):
        segmenter.encode([["▁ab"]], 1.0, random.Random(0))


BPE_DROPOUT = {"tokenizer": {"bpe_dropout": 0.2}}


def dropout_epochs(split, tokenizer, *, seed: int, max_tokens: int, **options) -> EpochPlan:
    """The epochs of a plan whose one transform is BPE-dropout."""
    bpe = BpeDropout(split, tokenizer, seed=seed, max_tokens=max_tokens, **options)
    return EpochPlan(split, max_tokens=max_tokens, seed=seed, transforms=[bpe])


@pytest.fixture(scope="module")
def toy_split(tmp_path_factory):
    config = tiny_config(tmp_path_factory.mktemp("split") / "run", WIDER, BPE_DROPOUT)
    splits, tokenizer = prepare_splits(config.data, config.tokenizer, ("train",))
    return splits["train"], tokenizer


def test_epochs_are_seeded_and_differ_from_each_other(toy_split):
    split, tokenizer = toy_split
    first = dropout_epochs(split, tokenizer, p=0.2, seed=7, max_tokens=1000)
    again = dropout_epochs(split, tokenizer, p=0.2, seed=7, max_tokens=1000)
    other_seed = dropout_epochs(split, tokenizer, p=0.2, seed=8, max_tokens=1000)
    e0, e1 = first.data(0), first.data(1)
    assert (e0.src, e0.tgt, e0.batches) == (again.data(0).src, again.data(0).tgt,
                                            again.data(0).batches)  # fmt: skip
    assert e0.src != e1.src and e0.tgt != e1.tgt
    assert other_seed.data(0).src != e0.src
    assert e0.src != split.src  # the segmentation did change
    for data in (e0, e1):
        assert all(s[-1] == EOS_ID for s in data.src)
        assert all(t[0] == BOS_ID and t[-1] == EOS_ID for t in data.tgt)
        assert tokenizer.decode_src(data.src) == tokenizer.decode_src(split.src)
        assert tokenizer.decode_tgt(data.tgt) == tokenizer.decode_tgt(split.tgt)
        assert sorted(i for batch in data.batches for i in batch) == list(range(len(split)))
        for batch in data.batches:
            width = max(max(len(data.src[i]), len(data.tgt[i])) for i in batch)
            assert len(batch) * width <= 1000 or len(batch) == 1


def test_a_pair_too_long_after_dropout_keeps_its_plain_segmentation(toy_split):
    split, tokenizer = toy_split
    longest = max(max(len(s) - 1, len(t) - 2) for s, t in zip(split.src, split.tgt, strict=True))
    epochs = dropout_epochs(split, tokenizer, p=0.5, seed=0, max_tokens=1000, max_length=longest)
    data = epochs.data(0)
    plain = [i for i in range(len(split)) if data.src[i] is split.src[i]]
    assert 0 < len(plain) < len(split)  # some fell back, not all
    assert all(len(s) - 1 <= longest and len(t) - 2 <= longest
               for s, t in zip(data.src, data.tgt, strict=True))  # fmt: skip
    assert all(data.tgt[i] is split.tgt[i] for i in plain)


def test_training_sees_a_new_segmentation_each_epoch(tmp_path):
    session = open_session(
        tiny_config(tmp_path / "run", WIDER, BPE_DROPOUT), resume=False, overwrite=False
    )
    plain = TokenBatchSampler(
        [len(s) for s in session.train_split.src],
        [len(t) for t in session.train_split.tgt],
        max_tokens=1000,
        seed=0,
    ).epoch(0)
    e0, e1 = session.epochs.data(0), session.epochs.data(1)
    assert e0.src != session.train_split.src and e0.src != e1.src
    assert len(e0.batches) > len(plain)  # more tokens, so more batches under the same budget
    off = open_session(
        tiny_config(tmp_path / "off", WIDER, **{"tokenizer.bpe_dropout": 0}),
        resume=False,
        overwrite=False,
    )
    assert off.epochs.data(1).src is off.train_split.src


def losses(run_dir) -> list[float]:
    return [loss for _, loss in train_losses(run_dir)]


def test_resume_inside_an_epoch_is_bit_identical(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(tiny_config(straight, WIDER, BPE_DROPOUT, max_steps=12), progress_bar=False)
    probe = open_session(
        tiny_config(tmp_path / "probe", WIDER, BPE_DROPOUT), resume=False, overwrite=False
    )
    n_batches = len(probe.epochs.data(0).batches)
    assert 12 > n_batches + 2, "the run must cross an epoch boundary and resume inside epoch 1"
    train(tiny_config(resumed, WIDER, BPE_DROPOUT, max_steps=n_batches + 2), progress_bar=False)
    train(tiny_config(resumed, WIDER, BPE_DROPOUT, max_steps=12), resume=True, progress_bar=False)
    assert losses(resumed) == losses(straight)
    a = torch.load(straight / "last.pt", weights_only=False)["model"]
    b = torch.load(resumed / "last.pt", weights_only=False)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_config_refuses_p_of_one():
    with pytest.raises(ConfigError, match=r"tokenizer\.bpe_dropout"):
        load_config(None, ["tokenizer.bpe_dropout=1"])


def test_an_epoch_trains_on_its_dropout_segmentation_once(tmp_path, monkeypatch):
    probe = open_session(
        tiny_config(tmp_path / "probe", WIDER, BPE_DROPOUT), resume=False, overwrite=False
    )
    epoch = probe.epochs.data(0)
    seen = []  # every (source, target) pair the loop batched

    def recording_collate(src, tgt, *args, **kwargs):
        seen.extend(zip(map(tuple, src), map(tuple, tgt), strict=True))
        return collate(src, tgt, *args, **kwargs)

    monkeypatch.setattr(batching, "collate", recording_collate)
    result = train(
        tiny_config(tmp_path / "run", WIDER, BPE_DROPOUT, max_epochs=1), progress_bar=False
    )
    assert (result.steps, result.stopped_because) == (len(epoch.batches), "max_epochs")
    assert len(epoch.batches) > len(probe.epochs.sampler)  # not the plain segmentation's count
    assert sorted(seen) == sorted(zip(map(tuple, epoch.src), map(tuple, epoch.tgt), strict=True))
    plain = zip(map(tuple, probe.train_split.src), map(tuple, probe.train_split.tgt), strict=True)
    assert sorted(seen) != sorted(plain)


@pytest.mark.parametrize("sides", ["source", "target"])
def test_one_side_only_leaves_the_other_plain(toy_split, sides):
    split, tokenizer = toy_split
    data = dropout_epochs(split, tokenizer, p=0.2, seed=7, max_tokens=1000, sides=sides).data(0)
    changed, kept = (data.src, data.tgt) if sides == "source" else (data.tgt, data.src)
    plain_changed, plain_kept = (
        (split.src, split.tgt) if sides == "source" else (split.tgt, split.src)
    )
    assert kept == plain_kept
    assert changed != plain_changed
    assert tokenizer.decode_src(changed) == tokenizer.decode_src(plain_changed)


def test_config_refuses_an_unknown_side():
    with pytest.raises(ConfigError, match=r"tokenizer\.bpe_dropout_sides"):
        load_config(None, ["tokenizer.bpe_dropout_sides=decoder"])

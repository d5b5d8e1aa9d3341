"""The plan times a shape's steps as training will take them: the batch reaches the model as
`train.layout` and `train.static_shapes` say."""

import random

import pytest
import torch

from tfm.config import load_config
from tfm.data.batching import EpochData, TokenBatchSampler, static_size
from tfm.data.pipeline import EncodedSplit
from tfm.data.ragged import lengths_of
from tfm.data.tokenizer import BOS_ID, EOS_ID
from tfm.prediction.settings import DecodeSettings
from tfm.prediction.translate import search_ids
from tfm.training.recipe.calibration import Calibration, decoding_step_costs
from tfm.training.recipe.ladder import LADDER
from tfm.transformer import Transformer, build_model


def framed_split(n: int) -> EncodedSplit:
    """`n` pairs of random ids, framed as training frames them, of lengths 2 to 30."""
    rng = random.Random(0)
    ids = [[rng.randrange(4, 60) for _ in range(rng.randint(2, 30))] for _ in range(2 * n)]
    src, tgt = [s + [EOS_ID] for s in ids[:n]], [[BOS_ID, *t, EOS_ID] for t in ids[n:]]
    return EncodedSplit("train", [""] * n, [""] * n, src, tgt, report=None)


@pytest.mark.parametrize(
    "settings", [["train.layout=padded"], ["train.layout=packed"], ["train.static_shapes=true"]]
)
def test_the_timed_steps_take_batches_as_training_does(monkeypatch, settings):
    seen = []  # (packed, source shape, target shape) of each training forward
    forward = Transformer.forward

    def spy(self, src, tgt, *args, **kwargs):
        seen.append((kwargs.get("packed") is not None, tuple(src.shape), tuple(tgt.shape)))
        return forward(self, src, tgt, *args, **kwargs)

    monkeypatch.setattr(Transformer, "forward", spy)
    config = load_config(None, settings)
    split = framed_split(200)
    clock = Calibration(train=split, validation=lambda: split, config=config, tokenizer=None,
                        vocab_size=64, device=torch.device("cpu"), dtype=torch.float32)  # fmt: skip
    assert clock.step_seconds(LADDER[0], max_tokens=512) > 0
    assert len(seen) == 7  # the untimed and the timed steps
    packed = "train.layout=packed" in settings
    assert all(p == packed for p, _, _ in seen)
    if packed:  # one row of the batch's real tokens
        assert all(src[0] == 1 and tgt[0] == 1 for _, src, tgt in seen)
    widths = {(src[1], tgt[1]) for _, src, tgt in seen}
    if "train.static_shapes=true" in settings:  # both sides padded to one width of a fixed set
        assert all(s == t == static_size(s) for s, t in widths)
    else:
        assert any(s != t for s, t in widths)


class TokenClock:
    """A clock that the model's forward moves on by a millisecond per 1,000 tokens of its
    batch: steps whose time is their batch's size, as on a CPU."""

    def __init__(self, monkeypatch):
        self.now = 0.0
        forward = Transformer.forward

        def counted(model, src, tgt, *args, **kwargs):
            self.now += (src.numel() + tgt.numel()) * 1e-6
            return forward(model, src, tgt, *args, **kwargs)

        monkeypatch.setattr(Transformer, "forward", counted)

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_a_step_is_timed_on_batches_near_the_epochs_mean_not_its_first_ones(monkeypatch, layout):
    # 1,000 pairs of lengths 3 to 41 in 59 batches of 512 tokens, the third of one sentence (the
    # end of a length group): a small corpus's epoch
    rng = random.Random(11)
    n = 1000
    ids = [[rng.randrange(4, 60) for _ in range(rng.randint(2, 39))] for _ in range(2 * n)]
    src, tgt = [s + [EOS_ID] for s in ids[:n]], [[BOS_ID, *t, EOS_ID] for t in ids[n:]]
    split = EncodedSplit("train", [""] * n, [""] * n, src, tgt, report=None)
    clock = TokenClock(monkeypatch)
    config = load_config(None, [f"train.layout={layout}"])
    calibration = Calibration(train=split, validation=lambda: split, config=config,
                              tokenizer=None, vocab_size=64, device=torch.device("cpu"),
                              dtype=torch.float32, timer=clock)  # fmt: skip
    seconds = calibration.step_seconds(LADDER[0], max_tokens=512)

    # what each batch of the epoch takes on that clock: its tokens as they reach the model
    sampler = TokenBatchSampler(lengths_of(src), lengths_of(tgt), max_tokens=512, seed=0)
    taken = []
    for indices in sampler.epoch(0):
        batch = EpochData(src=src, tgt=tgt, batches=[indices]).batch(indices)
        if layout == "packed":  # the real tokens only
            tokens = batch.n_src_tokens + sum(len(tgt[i]) - 1 for i in indices)
        else:
            tokens = batch.src.numel() + batch.tgt_in.numel()
        taken.append(tokens * 1e-6)
    mean = sum(taken) / len(taken)
    assert min(taken[2:7]) < 0.2 * mean  # the epoch's first batches include one far below it
    assert seconds == pytest.approx(mean, rel=0.03)


class DecodingClock:
    """A clock that each decoding step moves on by `fixed` seconds and `per_row` more for each
    sentence (beam row) still decoding: a GPU's launch-bound step when `fixed` dominates, a CPU's
    arithmetic when `per_row` does. No row ever picks EOS, so that every sentence decodes to its
    output limit, as an untrained model's do."""

    def __init__(self, monkeypatch, *, fixed: float, per_row: float):
        self.now = 0.0
        decode_step = Transformer.decode_step

        def counted(model, tokens, cache, **kwargs):
            self.now += fixed + per_row * tokens.size(0)
            out = decode_step(model, tokens, cache, **kwargs)
            out.logits[..., EOS_ID] = float("-inf")
            return out

        monkeypatch.setattr(Transformer, "decode_step", counted)

    def __call__(self) -> float:
        return self.now


GPU, CPU = (1e-2, 1e-6), (0.0, 1e-4)  # a decoding step's fixed seconds and its seconds a row


@pytest.mark.parametrize(
    ("costs", "beam_size"),
    [(GPU, 1), (GPU, 3), (CPU, 3)],
    ids=["gpu-greedy", "gpu-beam", "cpu-beam"],
)
def test_a_validation_is_timed_from_a_steps_fixed_part_and_its_part_per_sentence(
    monkeypatch, costs, beam_size
):
    # 150 sentences in decoding batches of 1,200 source tokens (400 with a beam of 3): the
    # sentences timed are as many of the 48 as one batch holds (38; 12 with a beam), and the
    # split takes several batches
    clock = DecodingClock(monkeypatch, fixed=costs[0], per_row=costs[1])
    config = load_config(None, ["decoding.max_tokens=1200"])
    split = framed_split(150)
    calibration = Calibration(train=split, validation=lambda: split, config=config,
                              tokenizer=None, vocab_size=64, device=torch.device("cpu"),
                              dtype=torch.float32, timer=clock)  # fmt: skip
    estimate = calibration.validation_seconds(LADDER[0], beam_size)

    # the whole split decoded as validation decodes it, on the same clock
    strategy = {"strategy": "beam", "beam_size": beam_size} if beam_size > 1 else {}
    settings = DecodeSettings.from_config(
        config.decoding.model_copy(update={"strategy": "greedy", **strategy}), "cpu", "float32"
    )
    model = build_model(LADDER[0].model_args(vocab_size=64, max_len=config.model.max_len))
    started = clock()
    search_ids(model, [list(s) for s in split.src], settings)
    assert estimate == pytest.approx(clock() - started, rel=0.02)


def test_a_steps_two_parts_come_apart_only_where_the_sample_can_tell_them():
    limits = [10] * 20  # 20 sentences decoding 10 steps each; the FEW longest are 4
    fixed, per_row = decoding_step_costs(limits, 10 * 0.5 + 40 * 0.01, 10 * 0.5 + 200 * 0.01)
    assert (fixed, per_row) == (pytest.approx(0.5), pytest.approx(0.01))
    # the few alone timed at nothing (noise): never more per sentence than the whole batch's mean
    assert decoding_step_costs(limits, 0.0, 7.0) == (0.0, pytest.approx(7.0 / 200))
    # 6 sentences: the 4 longest hold most of the steps, too little to tell the parts apart
    assert decoding_step_costs([10] * 6, 5.0, 6.0) == (0.0, pytest.approx(6.0 / 60))

"""train.layout: packed batches (only the real tokens, end to end) train as padded batches do,
and the log counts the FLOPs a packed step computes."""

import pytest
import torch
import torch.nn.functional as F
from builders import WIDER, logged_losses, tiny_config, train_losses
from torch.utils.flop_counter import FlopCounterMode

from tfm.config import load_config
from tfm.data.batching import collate
from tfm.errors import ConfigError
from tfm.training import train
from tfm.training.utilisation import step_flops
from tfm.transformer import ModelArgs, build_model


def run_tiny(tmp_path, name: str, **keys):
    """Four steps without dropout (a packed batch draws its dropout masks in another shape)."""
    run = tmp_path / name
    keys = {"max_steps": 4, "validate_every": 4, **keys}
    train(tiny_config(run, WIDER, **{"model.dropout": 0.0}, **keys), progress_bar=False)
    return logged_losses(run)


def test_packed_batches_train_as_padded_batches_do(tmp_path):
    # The weights are not compared: Adam scales up the rounding noise of gradients that are
    # zero in exact arithmetic (the key projection's bias), which any change of summation order
    # moves; what the weights compute is compared instead, the validation loss.
    losses, val_loss = run_tiny(tmp_path, "padded")
    packed_losses, packed_val_loss = run_tiny(tmp_path, "packed", layout="packed")
    assert len(packed_losses) == len(losses) == 4
    assert packed_losses == pytest.approx(losses, rel=1e-5)
    assert packed_val_loss == pytest.approx(val_loss, rel=1e-5)


def test_packed_layout_and_static_shapes_exclude_each_other():
    with pytest.raises(ConfigError, match="train.layout: packed and train.static_shapes"):
        load_config(None, ["train.layout=packed", "train.static_shapes=true"])


def test_packed_step_flops_are_each_sentence_alone_counted_by_the_flop_counter():
    # Attention dropout > 0 takes SDPA's matmul path on the CPU, whose products the counter sees.
    args = ModelArgs(src_vocab_size=50, tgt_vocab_size=60, d_model=32, n_heads=4,
                     n_encoder_layers=2, n_decoder_layers=1, d_ff=48,
                     attention_dropout=0.1)  # fmt: skip
    model = build_model(args)
    generator = torch.Generator().manual_seed(0)
    lengths = [(5, 4), (9, 11), (7, 6)]  # (source, target) content tokens

    def ids(n):
        return [int(x) for x in torch.randint(3, 50, (n,), generator=generator)]

    pairs = [(ids(s) + [2], [1, *ids(t), 2]) for s, t in lengths]
    batch = collate([src for src, _ in pairs], [tgt for _, tgt in pairs])
    with FlopCounterMode(display=False) as counter:
        for src, tgt in pairs:  # each sentence alone: no padding
            alone = collate([src], [tgt])
            logits = model(alone.src, alone.tgt_in)  # (1, T, V)
            F.cross_entropy(logits[0], alone.tgt_out[0], reduction="sum").backward()
    assert step_flops(args, [batch], packed=True) == counter.get_total_flops()
    assert step_flops(args, [batch], packed=True) < step_flops(args, [batch])


def test_a_packed_run_resumes_exactly(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(tiny_config(straight, WIDER, max_steps=6, layout="packed"), progress_bar=False)
    train(tiny_config(resumed, WIDER, max_steps=3, layout="packed"), progress_bar=False)
    train(
        tiny_config(resumed, WIDER, max_steps=6, layout="packed"), resume=True, progress_bar=False
    )
    losses = train_losses(straight)  # with dropout: its random numbers continue too
    assert len(losses) == 6 and train_losses(resumed) == losses

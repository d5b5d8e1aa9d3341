"""train.static_shapes: batches padded to a few fixed shapes train as the unpadded batches do (the
same losses up to rounding), and torch.compile runs such steps on the CPU."""

import pytest
import torch
from builders import WIDER, logged_losses, tiny_config
from torch._dynamo.utils import counters

from tfm.data.batching import collate, pad_to_static_shape, static_shape, static_size
from tfm.rundir.checkpoint import load_checkpoint
from tfm.training import train
from tfm.training.session_opening import open_session
from tfm.transformer import ModelArgs, build_model

IDS = {"pad_id": 0, "bos_id": 1, "eos_id": 2}


def test_sizes_come_from_a_fixed_set_at_most_one_and_a_half_apart():
    sizes = [static_size(n) for n in range(1, 1025)]
    assert sorted(set(sizes)) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256,
                                  384, 512, 768, 1024]  # fmt: skip
    assert all(n <= size < 1.5 * n or size <= 2 for n, size in enumerate(sizes, start=1))
    assert static_shape(100, 20, 23, max_tokens=4096) == (4096 // 24, 24)
    assert static_shape(3, 2, 5, max_tokens=4096) == (4096 // 8, 8)  # widths start at 8
    assert static_shape(300, 20, 9, max_tokens=4096) == (384, 24)  # more than fit: rounded up


def test_padding_adds_positions_and_sentences_that_change_no_real_logit():
    args = ModelArgs(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=2,
                     n_encoder_layers=1, n_decoder_layers=2, d_ff=32, dropout=0.0)  # fmt: skip
    model = build_model(args).eval()
    batch = collate([[5, 6, 7, 2], [8, 2]], [[1, 9, 10, 2], [1, 11, 12, 13, 14, 2]])
    padded = pad_to_static_shape(batch, max_tokens=64, **IDS)
    assert padded.src.shape == padded.tgt_in.shape == padded.tgt_out.shape == (8, 8)
    assert padded.n_tgt_tokens == batch.n_tgt_tokens == 8
    assert (padded.tgt_out[2:] == 0).all() and (padded.src[2:, 0] == 2).all()
    keep, keep_padded = batch.tgt_out != 0, padded.tgt_out != 0
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in, keep=keep)  # (N, V)
        padded_logits = model(padded.src, padded.tgt_in, keep=keep_padded)
    assert torch.isfinite(padded_logits).all()
    torch.testing.assert_close(padded_logits, logits, rtol=1e-5, atol=1e-5)


def run_tiny(tmp_path, name: str, **keys):
    """STEPS steps without dropout (padding changes how many random numbers a mask draws)."""
    run = tmp_path / name
    keys = {"max_steps": 4, "validate_every": 4, **keys}
    train(tiny_config(run, WIDER, **{"model.dropout": 0.0}, **keys), progress_bar=False)
    return *logged_losses(run), load_checkpoint(run / "last.pt")["model"]


def test_static_shapes_train_as_dynamic_shapes_do(tmp_path):
    losses, val_loss, weights = run_tiny(tmp_path, "dynamic")
    static_losses, static_val_loss, static_weights = run_tiny(
        tmp_path, "static", static_shapes=True
    )
    assert len(static_losses) == len(losses) == 4
    assert static_losses == pytest.approx(losses, rel=1e-5)
    assert static_val_loss == pytest.approx(val_loss, rel=1e-4)
    session = open_session(
        tiny_config(tmp_path / "shapes", WIDER, static_shapes=True), resume=False, overwrite=False
    )
    shapes, n_batches = set(), 0
    for epoch in range(6):
        data = session.epochs.data(epoch)
        for indices in data.batches:
            batch = data.batch(indices)
            B, S = batch.src.shape
            sentences, width = static_shape(B, S, batch.tgt_in.size(1), max_tokens=1000)
            assert sentences * width <= 2.25 * 1000  # each side at most 1.5x
            shapes.add((sentences, width))
            n_batches += 1
    assert n_batches == 42 and len(shapes) <= 8  # a few shapes for many batches


def test_compiled_static_shape_steps_equal_eager_ones_on_the_cpu(tmp_path, compile_backend):
    eager_losses, eager_val, _ = run_tiny(
        tmp_path, "eager", static_shapes=True, max_steps=1, validate_every=1
    )
    losses, val, _ = run_tiny(
        tmp_path, "compiled", static_shapes=True, compile=True, max_steps=1, validate_every=1
    )
    assert counters["stats"]["unique_graphs"] >= 1  # it did go through torch.compile
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    assert val == pytest.approx(eager_val, rel=1e-4)

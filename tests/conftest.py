"""Fixtures shared across test folders."""

import pytest
import torch
from tiny_models import single_thread, train_copy_model

from tfm.config import Config, load_config
from tfm.transformer import Transformer


@pytest.fixture(scope="session")
def tiny_config():
    """Factory: a config for a 1+1-layer, d_model-16 model on 120 toy pairs (trains in seconds);
    keyword arguments override `train.*` keys."""

    def make(run_dir, **train_keys) -> Config:
        sets = [
            f"run_dir={run_dir}",
            "data.toy.n_train=120",
            "data.toy.n_validation=6",
            "data.toy.n_test=6",
            "tokenizer.vocab_size=150",
            "model.d_model=16",
            "model.n_heads=2",
            "model.n_encoder_layers=1",
            "model.n_decoder_layers=1",
            "model.d_ff=32",
            "train.max_tokens=800",
            "train.log_every=1",
            "train.threads=1",  # runs compared bit for bit use one thread count
            "train.warmup_steps=2",
            "decoding.max_len_b=2",
        ]
        return load_config(None, sets + [f"train.{k}={v}" for k, v in train_keys.items()])

    return make


@pytest.fixture
def progress_totals(monkeypatch) -> list:
    """The `total` of each progress bar training opens (what it plans to train), recorded."""
    from tfm.training import progress

    totals = []

    class RecordingBar(progress.tqdm):
        def __init__(self, *args, total=None, **kwargs):
            totals.append(total)
            super().__init__(*args, total=total, **kwargs)

    monkeypatch.setattr(progress, "tqdm", RecordingBar)
    return totals


@pytest.fixture
def full_float32():
    """float32 matrix products in full float32 on a GPU (no TF32), so that CUDA and CPU results
    differ by rounding alone (the CUDA tests)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


@pytest.fixture(scope="session")
def copy_model() -> Transformer:
    """A small model trained to copy its source, once for all the decoding tests."""
    with single_thread():
        return train_copy_model()

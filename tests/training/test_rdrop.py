"""train.rdrop_alpha: R-Drop runs each batch twice in one doubled batch and adds the two passes'
symmetric KL divergence to the loss."""

from types import SimpleNamespace

import pytest
import torch
from tiny_run import logged_losses, write_tiny_config

from tfm.config import load_config
from tfm.data.batching import collate
from tfm.training import train
from tfm.training.loop import _batch_loss_sum
from tfm.transformer import Transformer

STEPS = 4


def run_tiny(tmp_path, name: str, *, rdrop_alpha: float, dropout: float):
    run = tmp_path / name
    train_keys = {"max_steps": STEPS, "validate_every": STEPS, "rdrop_alpha": rdrop_alpha}
    path = write_tiny_config(
        tmp_path / f"{name}.yaml", run, n_train=240, n_eval=8, dropout=dropout, max_len_b=3,
        train=train_keys,
    )  # fmt: skip
    train(load_config(path), progress_bar=False)
    return logged_losses(run)


def test_rdrop_without_dropout_trains_exactly_like_plain_cross_entropy(tmp_path):
    # The two passes agree without dropout, so the doubled batch must give the same loss,
    # the same updates, and the same model: this checks the doubling and its normalisation.
    plain_losses, plain_val = run_tiny(tmp_path, "plain", rdrop_alpha=0.0, dropout=0.0)
    losses, val = run_tiny(tmp_path, "rdrop", rdrop_alpha=5.0, dropout=0.0)
    assert len(losses) == STEPS
    assert losses == pytest.approx(plain_losses, rel=1e-5)
    assert val == pytest.approx(plain_val, rel=1e-5)


def test_rdrop_with_dropout_adds_a_positive_kl_term_linear_in_alpha():
    torch.manual_seed(0)
    model = Transformer(
        src_vocab_size=40, tgt_vocab_size=40, d_model=16, n_heads=2, n_encoder_layers=1,
        n_decoder_layers=1, d_ff=32, dropout=0.3, attention_dropout=0.0, activation="relu",
        activation_dropout=0.0, norm_position="post", share_embeddings=True, tie_output=True,
        max_len=32, pad_id=0,
    )  # fmt: skip
    model.train()
    batch = collate([[5, 6, 7, 3], [8, 9, 3]], [[2, 10, 11, 12, 3], [2, 13, 3]])

    def loss(alpha: float) -> float:
        config = SimpleNamespace(train=SimpleNamespace(rdrop_alpha=alpha, label_smoothing=0.1))
        torch.manual_seed(1)  # the same dropout masks for every alpha
        with torch.no_grad():
            return float(_batch_loss_sum(SimpleNamespace(config=config, model=model), model, batch))

    one, three, five = loss(1.0), loss(3.0), loss(5.0)
    kl_quarter = (three - one) / 2  # alpha/4 * (KL + KL) per unit of alpha
    assert kl_quarter > 1e-4  # different masks: the passes disagree
    assert five - three == pytest.approx(2 * kl_quarter, rel=1e-4)
    assert one - kl_quarter == pytest.approx(loss(1e-12), rel=1e-4)  # alpha -> 0: the mean CE

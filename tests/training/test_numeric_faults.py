"""Numeric faults: a non-finite loss skips the update; too many in a row stop training clearly; a
non-finite validation score is never "best"; non-finite weights are never written."""

import math

import pytest
import torch
from builders import tiny_config, train_losses

from tfm.errors import CheckpointError, TrainingError
from tfm.rundir.checkpoint import load_checkpoint
from tfm.training import step, train, validation


def nan_at(steps: set[int], counter: list[int]):
    """A loss function that is NaN on the given (1-based) calls."""
    real = step.projected_loss_sum

    def loss(*args, **kwargs):
        counter[0] += 1
        value = real(*args, **kwargs)
        return value * float("nan") if counter[0] in steps else value

    return loss


def test_nan_loss_skips_the_update_and_is_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(step, "projected_loss_sum", nan_at({2, 3}, [0]))
    result = train(tiny_config(tmp_path / "run", max_steps=5), progress_bar=False)
    assert result.steps == 5
    state = load_checkpoint(next((tmp_path / "run" / "checkpoints").glob("step-*.pt")))
    assert state["progress"]["nonfinite_total"] == 2
    assert state["progress"]["nonfinite_in_a_row"] == 0
    assert all(torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point())
    assert all(math.isfinite(loss) for _, loss in train_losses(tmp_path / "run"))


def test_too_many_in_a_row_stop_with_step_lr_and_remedies(tmp_path, monkeypatch):
    monkeypatch.setattr(step, "projected_loss_sum", nan_at(set(range(3, 100)), [0]))
    with pytest.raises(TrainingError) as info:
        train(tiny_config(tmp_path / "run", max_steps=20, max_nonfinite=3), progress_bar=False)
    message = str(info.value)
    assert "stopped at step 5" in message and "3 non-finite losses in a row" in message
    assert "lr " in message and "train.lr" in message


def test_nan_validation_score_is_never_best(tmp_path, monkeypatch):
    real = validation.evaluate_split

    def nan_bleu(*args, **kwargs):
        scores, hyps = real(*args, **kwargs)
        return {**scores, "bleu": float("nan")}, hyps

    monkeypatch.setattr(validation, "evaluate_split", nan_bleu)
    result = train(tiny_config(tmp_path / "run", max_steps=2, validate_every=1), progress_bar=False)
    assert result.best_score is None
    assert not (tmp_path / "run" / "best.pt").exists()
    assert (tmp_path / "run" / "last.pt").exists()


def test_non_finite_weights_are_never_written(tmp_path):
    from tfm.rundir.model_file import save_model
    from tfm.transformer import ModelArgs, build_model

    model = build_model(ModelArgs(src_vocab_size=8, tgt_vocab_size=8, d_model=8, n_heads=2,
                                  n_encoder_layers=1, n_decoder_layers=1, d_ff=8))  # fmt: skip
    with torch.no_grad():
        next(model.parameters())[0, 0] = float("inf")
    with pytest.raises(CheckpointError, match="not finite"):
        save_model(tmp_path / "m.pt", model, {}, step=1, tokenizer_fingerprint="x")
    assert not (tmp_path / "m.pt").exists()

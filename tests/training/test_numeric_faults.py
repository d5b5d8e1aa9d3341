"""Numeric faults: a non-finite loss skips the update; too many in a row stop training clearly; a
non-finite validation score is never "best"; non-finite weights are never written."""

import math

import pytest
import torch
from builders import tiny_config, train_losses

from tfm.errors import CheckpointError, TrainingError
from tfm.rundir.checkpoint import load_checkpoint
from tfm.training import batch_layout, session_opening, train, validation


def nan_at(steps: set[int], counter: list[int]):
    """A loss function that is NaN on the given (1-based) calls."""
    real = batch_layout.projected_loss_sum

    def loss(*args, **kwargs):
        counter[0] += 1
        value = real(*args, **kwargs)
        return value * float("nan") if counter[0] in steps else value

    return loss


def test_nan_loss_skips_the_update_and_is_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(batch_layout, "projected_loss_sum", nan_at({2, 3}, [0]))
    result = train(tiny_config(tmp_path / "run", max_steps=5), progress_bar=False)
    assert result.steps == 5
    state = load_checkpoint(next((tmp_path / "run" / "checkpoints").glob("step-*.pt")))
    assert state["progress"]["nonfinite_total"] == 2
    assert state["progress"]["nonfinite_in_a_row"] == 0
    assert all(torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point())
    assert all(math.isfinite(loss) for _, loss in train_losses(tmp_path / "run"))


def test_too_many_in_a_row_stop_with_step_lr_and_remedies(tmp_path, monkeypatch):
    monkeypatch.setattr(batch_layout, "projected_loss_sum", nan_at(set(range(3, 100)), [0]))
    with pytest.raises(TrainingError) as info:
        train(tiny_config(tmp_path / "run", max_steps=20, max_nonfinite=3), progress_bar=False)
    message = str(info.value)
    assert "stopped at step 5" in message and "3 non-finite losses in a row" in message
    assert "lr " in message and "train.lr" in message


def test_nan_validation_score_is_never_best(tmp_path, monkeypatch):
    real = validation.evaluate_chunks

    def nan_bleu(*args, **kwargs):
        scores, hyps = real(*args, **kwargs)
        return {**scores, "bleu": float("nan")}, hyps

    monkeypatch.setattr(validation, "evaluate_chunks", nan_bleu)
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


def logged_events(run) -> list[dict]:
    from builders import metric_events

    timing = ("tokens_per_s", "step_ms", "peak_mib", "model_tflops_per_s")
    return [{k: v for k, v in e.items() if k not in timing} for e in metric_events(run)]


def test_steps_read_once_per_window_log_and_skip_what_steps_read_one_by_one_do(
    tmp_path, monkeypatch
):
    """As on a GPU: the outcomes stay on the device until the log line (every 4 steps) reads
    them; the NaN steps are skipped on the device all the same, and counted when read."""
    runs = {}
    for name, each_step in (("each", True), ("window", False)):
        monkeypatch.setattr(session_opening, "reads_each_step", lambda device, e=each_step: e)
        monkeypatch.setattr(batch_layout, "projected_loss_sum", nan_at({2, 3, 7}, [0]))
        run = tmp_path / name
        train(tiny_config(run, max_steps=10, log_every=4), progress_bar=False)
        state = load_checkpoint(next((run / "checkpoints").glob("step-*.pt")))
        runs[name] = logged_events(run), state["progress"], state["model"]
    (events, progress, weights), (w_events, w_progress, w_weights) = runs["each"], runs["window"]
    assert [e["step"] for e in w_events if "train_loss" in e] == [4, 8, 10]
    assert w_events == events and w_progress["nonfinite_total"] == 3
    for p in (progress, w_progress):
        del p["elapsed_s"], p["log_window"]["seconds"]
    assert w_progress == progress
    assert all(torch.equal(w_weights[k], weights[k]) for k in weights)


def test_too_many_in_a_row_read_late_name_the_step_and_when_it_was_read(tmp_path, monkeypatch):
    monkeypatch.setattr(session_opening, "reads_each_step", lambda device: False)
    monkeypatch.setattr(batch_layout, "projected_loss_sum", nan_at(set(range(3, 100)), [0]))
    config = tiny_config(tmp_path / "run", max_steps=20, max_nonfinite=3, log_every=8)
    with pytest.raises(TrainingError, match=r"^training stopped at step 5 \(read at step 8\): 3 "):
        train(config, progress_bar=False)


def test_a_step_does_not_read_the_device(tmp_path, monkeypatch):
    """Whatever would wait for a GPU (item, bool, float, tolist on a tensor) fails inside the
    step, which decides as it does on a GPU; the outcome is read afterwards, when asked."""
    from tfm.training import StopFlag, optimizer_step
    from tfm.training.data_parallel import DataParallel
    from tfm.training.distributed import Replicas
    from tfm.training.session_opening import open_session
    from tfm.transformer import model as model_module

    session = open_session(tiny_config(tmp_path / "run"), resume=False, overwrite=False)
    session.read_each_step = False
    monkeypatch.setattr(model_module, "skips_unneeded_masks", lambda ids: False)
    parallel = DataParallel(Replicas(), session, StopFlag())
    data = session.epochs.data(0)
    batches = [data.batch(b) for b in data.batches[:3]]

    def reads(*args, **kwargs):
        raise AssertionError("the step read a tensor's value on the host")

    with monkeypatch.context() as patch:
        for name in ("item", "tolist", "__bool__", "__float__", "__int__"):
            patch.setattr(torch.Tensor, name, reads)
        results = [optimizer_step(session, parallel, [batch]) for batch in batches]
    assert session.progress.tokens_seen == 0 and len(session.unread.steps) == 3
    session.read_steps()
    assert session.progress.tokens_seen == sum(r.tokens for r in results) > 0
    assert session.progress.log_window.steps == 3
    assert session.progress.log_window.loss_sum == sum(r.loss for r in results)


def test_a_skipped_step_leaves_weights_moments_and_step_count_as_they_were(tmp_path, monkeypatch):
    """The skip happens on the device (fused AdamW's found_inf): nothing of the optimizer moves."""
    import copy

    from tfm.training import StopFlag, optimizer_step
    from tfm.training.data_parallel import DataParallel
    from tfm.training.distributed import Replicas
    from tfm.training.session_opening import open_session

    session = open_session(tiny_config(tmp_path / "run"), resume=False, overwrite=False)
    parallel = DataParallel(Replicas(), session, StopFlag())
    data = session.epochs.data(0)
    optimizer_step(session, parallel, [data.batch(data.batches[0])])
    weights = copy.deepcopy(session.model.state_dict())
    moments = copy.deepcopy(session.optimizer.state_dict()["state"])
    monkeypatch.setattr(batch_layout, "projected_loss_sum", nan_at({1}, [0]))
    assert optimizer_step(session, parallel, [data.batch(data.batches[1])]).loss is None
    after = session.optimizer.state_dict()["state"]
    assert all(torch.equal(v, weights[k]) for k, v in session.model.state_dict().items())
    assert all(torch.equal(after[i][k], moments[i][k]) for i in moments for k in moments[i])
    assert float(after[0]["step"]) == 1.0 and session.progress.nonfinite_total == 1

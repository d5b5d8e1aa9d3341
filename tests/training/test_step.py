"""The public training step: `optimizer_step` on an open session is the loop's step (the loss the
loop logs, the tokens, the step count and its learning rate), with batches accumulated."""

import pytest
from builders import tiny_config, train_losses

from tfm.training import StopFlag, optimizer_step, train
from tfm.training.data_parallel import DataParallel
from tfm.training.distributed import Replicas
from tfm.training.schedule import learning_rate, peak_learning_rate
from tfm.training.session_opening import open_session


def first_logged_loss(run) -> float:
    return train_losses(run)[0][1]


@pytest.mark.parametrize("accumulate", [1, 2])
def test_a_step_taken_by_hand_is_the_loops_first_step(tmp_path, accumulate):
    train(tiny_config(tmp_path / "loop", max_steps=1, accumulate=accumulate), progress_bar=False)
    config = tiny_config(tmp_path / "hand", max_steps=1, accumulate=accumulate)
    session = open_session(config, resume=False, overwrite=False)
    parallel = DataParallel(Replicas(), session, StopFlag())
    data = session.epochs.data(0)
    batches = [data.batch(indices) for indices in data.batches[:accumulate]]
    result = optimizer_step(session, parallel, batches)
    assert result.loss == first_logged_loss(tmp_path / "loop")
    assert result.tokens == sum(b.n_tgt_tokens for b in batches) > 0
    assert session.progress.step == 1 and session.progress.tokens_seen == result.tokens
    optimizer_step(session, parallel, [data.batch(data.batches[-1])])
    second = learning_rate(2, peak=peak_learning_rate(config), warmup_steps=2)
    assert config.train.warmup_steps == 2 and session.progress.step == 2
    assert session.optimizer.param_groups[0]["lr"] == second

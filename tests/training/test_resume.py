"""Exact resume: k steps, stop, resume to N equals N steps in one go, bit for bit, on CPU.

And the comparison can fail: leaving out any one piece of the saved state breaks it.
"""

import pytest
import torch
from builders import WIDER, tiny_config, train_losses

from tfm.data.batching import TokenBatchSampler
from tfm.data.pipeline import prepare_splits
from tfm.errors import UsageError
from tfm.rundir.checkpoint import load_checkpoint, save_checkpoint
from tfm.rundir.manifest import record_manifest
from tfm.rundir.model_file import load_trained
from tfm.rundir.paths import RunPaths
from tfm.rundir.store import CheckpointStore
from tfm.training import session_opening, train

N_STEPS = 10


def weights(run_dir) -> dict:
    return load_checkpoint(run_dir / "last.pt")["model"]


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def batches_per_epoch(tmp_path_factory):
    config = tiny_config(tmp_path_factory.mktemp("probe") / "run", WIDER)
    splits, _ = prepare_splits(config.data, config.tokenizer, ("train",))
    src = [len(s) for s in splits["train"].src]
    tgt = [len(t) for t in splits["train"].tgt]
    return len(TokenBatchSampler(src, tgt, max_tokens=1000, seed=0).epoch(0))


@pytest.fixture(scope="module")
def straight(tmp_path_factory, batches_per_epoch):
    assert batches_per_epoch < N_STEPS, "the runs must cross an epoch boundary"
    run = tmp_path_factory.mktemp("straight") / "run"
    train(tiny_config(run, WIDER, max_steps=N_STEPS), progress_bar=False)
    return train_losses(run), weights(run)


def stop_and_resume(run, k: int) -> None:
    train(tiny_config(run, WIDER, max_steps=k), progress_bar=False)
    train(tiny_config(run, WIDER, max_steps=N_STEPS), resume=True, progress_bar=False)


@pytest.mark.parametrize("where", ["mid_epoch", "epoch_boundary"])
def test_resume_is_bit_identical(tmp_path, straight, batches_per_epoch, where):
    k = batches_per_epoch // 2 if where == "mid_epoch" else batches_per_epoch
    stop_and_resume(tmp_path / "run", k)
    assert train_losses(tmp_path / "run") == straight[0]
    assert len(straight[0]) == N_STEPS
    assert same_weights(weights(tmp_path / "run"), straight[1])


def restore_without(piece: str):
    """A `restore` that forgets one piece of the training state."""
    original = session_opening.restore

    def forgetful(session, checkpoint):
        state = checkpoint.state
        fresh_model = {k: v.clone() for k, v in session.model.state_dict().items()}
        fresh_optimizer = session.optimizer.state_dict()
        rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        original(session, checkpoint)
        if piece == "model":
            session.model.load_state_dict(fresh_model)
        elif piece == "optimizer":
            session.optimizer.load_state_dict(fresh_optimizer)
        elif piece == "rng":  # on a GPU, dropout draws from the CUDA generator
            torch.set_rng_state(rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state_all(cuda_rng)
        elif piece == "position":
            session.progress.position = 0
        elif piece == "step":  # the LR schedule is a function of the step
            session.progress.step = 0
        assert state is checkpoint.state

    return forgetful


@pytest.mark.parametrize("piece", ["model", "optimizer", "rng", "position", "step"])
def test_leaving_out_any_piece_breaks_the_comparison(tmp_path, monkeypatch, straight, piece):
    monkeypatch.setattr(session_opening, "restore", restore_without(piece))
    run = tmp_path / "run"
    stop_and_resume(run, 3)
    resumed = train_losses(run)
    assert [loss for _, loss in resumed] != [loss for _, loss in straight[0]] or not same_weights(
        weights(run), straight[1]
    )


def test_resume_refuses_a_changed_model(tmp_path):
    run = tmp_path / "run"
    train(tiny_config(run, WIDER, max_steps=2), progress_bar=False)
    changed = tiny_config(run, WIDER, max_steps=4).model_copy(deep=True)
    changed.model.d_ff = 96
    changed.train.seed = 5
    with pytest.raises(UsageError, match=r"model\.d_ff, train\.seed differ"):
        train(changed, resume=True, progress_bar=False)


def written_before(key: str, run) -> None:
    """Make the run's newest checkpoint look written by a version without `key` (section.name)."""
    section, name = key.split(".")
    newest = CheckpointStore(RunPaths(run).checkpoints).latest_loadable()
    del newest.state["config"][section][name]
    save_checkpoint(newest.state, newest.path)


def test_resume_accepts_a_checkpoint_from_before_a_key_existed(tmp_path):
    run = tmp_path / "run"
    train(tiny_config(run, WIDER, max_steps=2), progress_bar=False)
    written_before("model.activation_dropout", run)
    later = tiny_config(run, WIDER, max_steps=4).model_copy(deep=True)
    later.model.activation_dropout = 0.1  # not what the older version did
    with pytest.raises(UsageError, match=r": model\.activation_dropout differ"):
        train(later, resume=True, progress_bar=False)
    # The default (the older version did what the default does): it resumes.
    train(tiny_config(run, WIDER, max_steps=4), resume=True, progress_bar=False)
    assert [step for step, _ in train_losses(run)] == [1, 2, 3, 4]
    state = load_checkpoint(run / "best.pt")  # a model file from before the key, for eval
    del state["model_args"]["activation_dropout"]
    save_checkpoint(state, run / "best.pt")
    record_manifest(run, ["best.pt"])  # as that version wrote it
    loaded = load_trained(RunPaths(run), torch.device("cpu")).model.state_dict()
    assert all(torch.equal(loaded[name], state["model"][name]) for name in state["model"])


@pytest.mark.parametrize("budget", ["max_steps", "max_epochs", "max_minutes"])
def test_resuming_a_spent_budget_trains_nothing(tmp_path, caplog, batches_per_epoch, budget):
    run = tmp_path / "run"
    first = {"max_epochs": 1} if budget == "max_epochs" else {"max_steps": 4}
    steps = train(tiny_config(run, WIDER, **first), progress_bar=False).steps
    before, metrics = weights(run), (run / "metrics.jsonl").read_text()
    files = sorted(path.name for path in (run / "checkpoints").iterdir())
    spent = {
        "max_steps": {"max_steps": 4},
        "max_epochs": {"max_epochs": 1},
        "max_minutes": {"max_steps": 99, "max_minutes": 1e-6},
    }[budget]
    with caplog.at_level("INFO", logger="tfm"):
        result = train(tiny_config(run, WIDER, **spent), resume=True, progress_bar=False)
    assert (result.steps, result.stopped_because) == (steps, budget)
    assert f"nothing to train: the run has already reached train.{budget}" in caplog.text
    assert steps == (batches_per_epoch if budget == "max_epochs" else 4)
    assert same_weights(weights(run), before)
    assert (run / "metrics.jsonl").read_text() == metrics
    assert sorted(path.name for path in (run / "checkpoints").iterdir()) == files


def test_a_time_budget_ends_training_at_the_step_that_spends_it(tmp_path):
    config = tiny_config(tmp_path / "run", WIDER, max_steps=99, max_minutes=1e-6)
    result = train(config, progress_bar=False)
    assert (result.steps, result.stopped_because) == (1, "max_minutes")


def test_resume_without_a_checkpoint_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no complete checkpoint"):
        train(tiny_config(tmp_path / "run", WIDER, max_steps=2), resume=True, progress_bar=False)


def text_splits(folder, *, changed: str | None = None) -> dict:
    """Multi30k-like text files for the three splits in `folder` (the train split's first
    line replaced by `changed`), and the data section that reads them."""
    folder.mkdir(parents=True, exist_ok=True)
    words = ["dog", "cat", "man", "woman", "child", "horse", "bird", "car"]
    german = ["Hund", "Katze", "Mann", "Frau", "Kind", "Pferd", "Vogel", "Auto"]
    pairs = [(f"a {a} sees a {b}", f"ein {c} sieht ein {d}")
             for a, c in zip(words, german, strict=True)
             for b, d in zip(words, german, strict=True)]  # fmt: skip
    if changed:
        pairs[0] = (changed, pairs[0][1])
    for split, rows in (("train", pairs), ("val", pairs[:6]), ("test", pairs[6:12])):
        for lang, column in (("en", 0), ("de", 1)):
            text = "".join(row[column] + "\n" for row in rows)
            (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")
    names = (("train", "train"), ("validation", "val"), ("test", "test"))
    return {split: {"format": "text", "path": str(folder / name)} for split, name in names}


def text_config(run, data: dict, max_steps: int):
    return tiny_config(run, WIDER, data=data, max_steps=max_steps, **{"tokenizer.vocab_size": 120})


def test_resume_reads_moved_data_by_content_and_refuses_changed_training_data(tmp_path, caplog):
    run = tmp_path / "run"
    train(text_config(run, text_splits(tmp_path / "a"), 2), progress_bar=False)
    moved = text_splits(tmp_path / "b")  # the same files somewhere else
    train(text_config(run, moved, 4), resume=True, progress_bar=False)
    assert [step for step, _ in train_losses(run)] == [1, 2, 3, 4]
    assert "data.train differs from the run's" in caplog.text
    assert "resuming, as its content is the same" in caplog.text

    changed = text_splits(tmp_path / "c", changed="a dog sees a bird")
    with pytest.raises(UsageError, match=r"^cannot resume from .*: training data differ"):
        train(text_config(run, changed, 6), resume=True, progress_bar=False)


def test_resume_with_another_validation_split_says_so(tmp_path, caplog):
    run = tmp_path / "run"
    data = text_splits(tmp_path / "a")
    train(text_config(run, data, 2), progress_bar=False)
    other = {**data, "validation": data["test"]}
    train(text_config(run, other, 3), resume=True, progress_bar=False)
    assert "data.validation differs from the run's" in caplog.text
    assert "validation scores from here on are on the new split" in caplog.text
    assert "data.train differs" not in caplog.text

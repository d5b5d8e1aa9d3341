"""The resume policy on plain values: which changes refuse a resume (with the message), which go
on, and what the log is told when they do."""

import copy
import logging

import pytest

from tfm.config import load_config
from tfm.training.resume_policy import RunIdentity, judge_resume

START = {"epoch": 0, "position": 5}  # a run inside its first epoch


def config(**sections) -> dict:
    """The default config as a checkpoint stores it, with {section: {key: value}} changed."""
    data = load_config(None, []).model_dump(mode="json")
    for section, values in sections.items():
        data[section].update(values)
    return data


def identity(data: dict, *, tokenizer="tok", training="data", world_size=1) -> RunIdentity:
    return RunIdentity(
        config=data, tokenizer_fingerprint=tokenizer, data_fingerprint=training,
        world_size=world_size,
    )  # fmt: skip


def judge(stored: RunIdentity, new: RunIdentity, progress: dict = START):
    return judge_resume(stored, new, progress=progress, checkpoint="run/checkpoints/step-5.pt")


def test_the_same_run_resumes_with_nothing_to_say():
    verdict = judge(identity(config()), identity(config()))
    assert (verdict.refusal, verdict.notes) == (None, [])


def test_budgets_and_other_train_keys_may_change():
    changed = config(train={"max_steps": 99, "max_epochs": None, "lr": 0.01, "patience": 3})
    assert judge(identity(config()), identity(changed)).refusal is None
    how_to_run = config(train={"threads": 1, "tensorboard": False}, data={"control_chars": "x"})
    assert judge(identity(config()), identity(how_to_run)).refusal is None


def test_model_seed_and_fingerprints_refuse_naming_each_difference():
    changed = config(
        model={"d_ff": 96}, train={"seed": 5, "max_tokens": 123}, tokenizer={"joint": False}
    )
    new = identity(changed, tokenizer="other", training="other")
    assert judge(identity(config()), new).refusal == (
        "cannot resume from run/checkpoints/step-5.pt: tokenizer.joint, model.d_ff, "
        "train.max_tokens, train.seed, tokenizer.json, training data differ from the run's; "
        "change only budgets (max_steps, max_epochs, max_minutes, …) or start a new run"
    )


@pytest.mark.parametrize(
    ("stored", "new", "progress", "refused"),
    [
        (3, 1, {"epoch": 1, "position": 2}, True),  # epoch 1 was begun both ways
        (3, 0, {"epoch": 1, "position": 2}, True),
        (3, 2, {"epoch": 1, "position": 2}, False),  # epochs 0 and 1 keep their kind
        (3, 9, {"epoch": 1, "position": 2}, False),
        (3, 2, {"epoch": 2, "position": 0}, False),  # epoch 2 not begun yet
        (1, 2, {"epoch": 1, "position": 2}, True),  # epoch 1 was begun one way
        (0, 0, {"epoch": 7, "position": 2}, False),
    ],
)
def test_bidirectional_epochs_may_change_only_for_epochs_not_begun(stored, new, progress, refused):
    verdict = judge(
        identity(config(train={"bidirectional_epochs": stored})),
        identity(config(train={"bidirectional_epochs": new})),
        progress,
    )
    if not refused:
        assert verdict.refusal is None
    else:
        begun = progress["epoch"] + 1
        assert verdict.refusal.endswith(
            "train.bidirectional_epochs differs from the run's; change only budgets (max_steps, "
            f"max_epochs, max_minutes, …), train.bidirectional_epochs to no fewer than the {begun} "
            "epoch(s) begun or start a new run"
        )


def test_a_key_added_since_the_checkpoint_compares_as_its_default():
    stored = config()
    del stored["model"]["activation_dropout"]  # written before the key existed: it did 0.0
    assert judge(identity(stored), identity(config())).refusal is None
    later = config(model={"activation_dropout": 0.1})
    assert "model.activation_dropout differ" in judge(identity(stored), identity(later)).refusal


def test_moved_or_replaced_splits_go_on_with_a_warning_each():
    moved = config(data={
        "train": {"format": "text", "path": "b/train"},
        "validation": {"format": "text", "path": "b/val"},
    })  # fmt: skip
    verdict = judge(identity(config()), identity(moved))  # same training content: same fingerprint
    assert verdict.refusal is None
    toy = config()["data"]["train"]  # the default source, as the checkpoint stored it
    assert verdict.notes == [
        (logging.WARNING, f"data.train differs from the run's ({toy}, now {moved['data']['train']})"
                          ": resuming, as its content is the same"),
        (logging.WARNING, f"data.validation differs from the run's ({toy}, now "
                          f"{moved['data']['validation']}): validation scores from here on are on "
                          "the new split"),
    ]  # fmt: skip


def test_other_processes_and_accumulation_say_how_the_batches_change():
    stored = identity(config(train={"accumulate": 1}), world_size=2)
    verdict = judge(stored, identity(config(train={"accumulate": 1})), {"epoch": 3, "position": 8})
    assert verdict.refusal is None
    assert verdict.notes == [
        (logging.INFO, "the checkpoint was written by 2 process(es), this run has 1: training goes "
                       "on at batch 8 of epoch 3's global batch list, now cut into 1 shares a "
                       "step"),
        (logging.WARNING, "each optimizer step now takes 1 process(es) × 1 accumulated = 1 "
                          "batches instead of 2: the effective batch changes; "
                          "train.accumulate=2 keeps it"),
    ]  # fmt: skip
    same_batch = judge(stored, identity(config(train={"accumulate": 2})))
    assert [level for level, _ in same_batch.notes] == [logging.INFO]


def test_the_judgement_leaves_its_inputs_as_they_were():
    stored, new = config(train={"seed": 7}), config(model={"d_ff": 96})
    before = copy.deepcopy((stored, new))
    judge(identity(stored), identity(new))
    assert (stored, new) == before

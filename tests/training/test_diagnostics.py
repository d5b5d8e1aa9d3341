"""Degenerate-model warnings: they fire on constructed degenerate validations, name what to try,
and stay quiet on a healthy one; training gives the advice once, then one line while it lasts."""

import json
import logging

import pytest
from builders import tiny_config

from tfm.rundir.metrics import read_metrics
from tfm.training import train, validation
from tfm.training.diagnostics import (
    Finding,
    degenerate_warnings,
    has_loop,
    identical_warning,
    overfitting_warning,
    repetition_warning,
    unusable_model,
)

HEALTHY = [f"der Hund sieht {n} Katzen ." for n in range(18)] + ["ja .", "ja ."]


def history(val_losses, train_losses, every=100):
    """Metric events as training writes them: a train event, then a validation, per step."""
    events = []
    for i, (val, train_loss) in enumerate(zip(val_losses, train_losses, strict=True), start=1):
        events.append({"step": i * every, "train_loss": train_loss, "lr": 1e-3})
        events.append({"step": i * every, "val_loss": val, "val_bleu": 10.0})
    return events


def test_a_healthy_validation_gives_no_warning():
    falling = history([4.0, 3.5, 3.2, 3.1], [4.5, 3.8, 3.3, 3.0])
    assert degenerate_warnings(HEALTHY, falling) == []


def test_the_same_hypothesis_for_most_sources_is_named():
    hypotheses = ["der Mann ."] * 8 + HEALTHY[:12]
    message = str(identical_warning(hypotheses))
    assert message.startswith("40% of validation hypotheses (8 of 20) are the same sentence")
    assert "'der Mann .'" in message and "train.lr" in message
    assert identical_warning(["der Mann ."] * 5 + HEALTHY[:15]) is None  # 25%: below 30%


def test_empty_hypotheses_count_as_identical():
    assert "are empty" in str(identical_warning([""] * 15 + HEALTHY[:5]))


def test_too_few_hypotheses_say_nothing():
    assert degenerate_warnings(["x"] * 9, []) == []


def test_repetition_loops_are_found():
    assert has_loop("der der der Hund".split())
    assert has_loop("ich sehe den Hund den Hund den Hund .".split())
    assert has_loop("a b c d a b c d a b c d".split())
    assert not has_loop("der Hund der Katze der Frau".split())
    assert not has_loop("sehr sehr gut".split())  # twice is language, three times a loop


def test_repetition_warning_fires_at_ten_percent():
    looping = ["die Katze die Katze die Katze die Katze"] * 2
    message = str(repetition_warning(looping + HEALTHY[:18]))
    assert message.startswith("10% of validation hypotheses (2 of 20) repeat themselves")
    assert "model.dropout" in message
    assert repetition_warning(looping[:1] + HEALTHY[:19]) is None


def test_a_loop_inside_a_script_without_spaces_is_found():
    """A Japanese hypothesis is one piece between spaces: its loops are of characters."""
    healthy = [f"私は{n}匹の猫を見た。" for n in range(18)]
    looping = ["私は猫猫猫猫猫猫猫猫を見た。", "私は犬を犬を犬を犬を"]
    message = str(repetition_warning(looping + healthy))
    assert message.startswith("10% of validation hypotheses (2 of 20) repeat themselves")
    assert repetition_warning(["彼は少し少し疲れた。"] * 2 + healthy) is None  # twice: language


def test_validation_loss_rising_while_training_loss_falls_is_overfitting():
    events = history([3.0, 2.5, 2.6, 2.8], [3.2, 2.4, 2.0, 1.7])
    message = str(overfitting_warning(events))
    assert message.startswith("validation loss rose at 2 validations in a row")
    assert "(2.500 -> 2.600 -> 2.800, step 400)" in message
    assert "training loss fell (2.400 -> 1.700)" in message and "train.patience" in message


def test_no_overfitting_warning_when_either_trend_is_missing():
    one_rise = history([3.0, 2.5, 2.4, 2.6], [3.2, 2.4, 2.0, 1.7])
    both_rising = history([3.0, 3.1, 3.2], [2.0, 2.1, 2.2])  # diverging, not overfitting
    assert overfitting_warning(one_rise) is None
    assert overfitting_warning(both_rising) is None
    assert overfitting_warning(history([3.0, 3.1], [2.0, 1.0])) is None


def test_all_three_together(tmp_path):
    path = tmp_path / "metrics.jsonl"
    events = history([3.0, 3.1, 3.2], [3.0, 2.0, 1.0])
    text = "".join(json.dumps(e) + "\n" for e in events) + '{"step": 30'  # a torn last line
    path.write_text(text, encoding="utf-8")
    hypotheses = ["der der der"] * 12
    findings = degenerate_warnings(hypotheses, read_metrics(path))
    assert [f.kind for f in findings] == ["identical", "repetition", "overfitting"]


def test_training_gives_the_advice_once_and_then_one_line_while_it_persists(
    tmp_path, monkeypatch, caplog
):
    def looping(hypotheses, history):
        step = history[-1]["step"]
        return [Finding("repetition", f"{step}0% of validation hypotheses repeat", "ADVICE")]

    monkeypatch.setattr(validation, "degenerate_warnings", looping)
    with caplog.at_level(logging.WARNING, logger="tfm.training.validation"):
        train(tiny_config(tmp_path / "run", max_steps=3, validate_every=1), progress_bar=False)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "step 1: 10% of validation hypotheses repeat: ADVICE",
        "step 2: still 20% of validation hypotheses repeat (advice at step 1)",
        "step 3: still 30% of validation hypotheses repeat (advice at step 1)",
    ]


@pytest.mark.parametrize(
    ("bleu", "findings", "reason"),
    [
        (0.09, (), "validation BLEU 0.09 is below 1"),
        (float("nan"), (), "validation BLEU nan is below 1"),
        (None, (), "it was never validated"),
        (12.0, ("identical",), "its validation hypotheses are identical"),
        (9.0, ("repetition", "identical"), "its validation hypotheses are identical and repeating"),
        (12.0, ("overfitting",), None),  # a usable model, only past its best
        (1.0, (), None),
    ],
)
def test_when_a_model_cut_short_by_the_time_limit_is_not_usable(bleu, findings, reason):
    assert unusable_model(bleu, findings) == reason

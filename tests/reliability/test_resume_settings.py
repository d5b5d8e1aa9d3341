"""A resume that changes the optimizer's settings trains with them: the restored AdamW gets the
new betas, eps and weight decay, each change is logged, and what the run records (config.yaml, the
checkpoint) is what it used."""

import re

import torch
import yaml
from attack_helpers import invoke, resume
from builders import tiny_config_file
from shared_runs import copy_run

from tfm.rundir.checkpoint import load_checkpoint


def test_resume_applies_and_logs_changed_optimizer_settings(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=2, validate_every=2)
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    run = tmp_path / "run"
    changed = ("train.weight_decay=0.05", "train.eps=1e-6", "train.betas=[0.8,0.9]",
               "train.lr=0.002", "train.max_steps=3")  # fmt: skip
    result = resume(run, *changed)
    assert result.exit_code == 0, result.stderr

    for line in (
        "train.betas changes from [0.9, 0.98] to [0.8, 0.9] with this resume (in the optimizer)",
        "train.eps changes from 1e-09 to 1e-06 with this resume (in the optimizer)",
        "train.weight_decay changes from 0.0 to 0.05 with this resume (in the optimizer)",
    ):
        assert line in result.stderr
    # the first run's rate is the recipe's
    assert re.search(r"train\.lr changes from \S+ to 0\.002 with this resume \(in the schedule\)",
                     result.stderr)  # fmt: skip
    (latest,) = sorted((run / "checkpoints").glob("step-00000003*.pt"))
    state = load_checkpoint(latest)
    for group in state["optimizer"]["param_groups"]:
        assert group["betas"] == (0.8, 0.9)
        assert group["eps"] == 1e-6 and group["weight_decay"] == 0.05
    recorded = yaml.safe_load((run / "config.yaml").read_text())["train"]
    assert recorded["weight_decay"] == state["config"]["train"]["weight_decay"] == 0.05
    assert recorded["betas"] == [0.8, 0.9]


def test_a_resume_with_another_weight_decay_trains_differently(tmp_path):
    """Before, the restored optimizer kept the checkpoint's weight decay: both resumes below
    trained the same weights while the second recorded 0.5."""
    config = tiny_config_file(tmp_path, max_steps=2, validate_every=2)
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    weights = {}
    for weight_decay in (0.0, 0.5):
        run = copy_run(tmp_path / "run", tmp_path / f"wd-{weight_decay}")
        result = resume(run, f"train.weight_decay={weight_decay}", "train.max_steps=3")
        assert result.exit_code == 0, result.stderr
        weights[weight_decay] = load_checkpoint(run / "last.pt")["model"]
    changed = [name for name, w in weights[0.0].items() if not torch.equal(w, weights[0.5][name])]
    assert changed  # decayed weights moved towards zero

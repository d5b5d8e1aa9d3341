"""Nothing poisoned: a diverging run writes no file with NaN or infinity, anywhere, and a model
file that holds one (written by an older tfm) is refused by eval and translate."""

import torch
from attack_helpers import error_line, invoke, non_finite_files, resume
from builders import tiny_config_file

from tfm.atomic import atomic_save
from tfm.rundir.checkpoint import load_checkpoint


def test_a_diverging_resume_writes_nothing_and_a_plain_resume_goes_on(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=3, validate_every=3, checkpoint_every=1)
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    run = tmp_path / "run"
    before = {p: p.read_bytes() for p in run.rglob("*.pt")}

    # An infinite learning rate is refused by the schema; one past float32 makes every weight inf.
    inf = invoke("train", "--config", config, "--resume", "--set", "train.lr=.inf")
    assert inf.exit_code == 2 and "train.lr: input should be a finite number" in inf.stderr
    bad = resume(run, "train.max_steps=6", "train.lr=1e39")

    assert bad.exit_code == 1
    line = error_line(bad.stderr)
    assert "step-00000004.pt: state['model']" in line
    assert "is not finite, so nothing was written" in line
    assert {p: p.read_bytes() for p in run.rglob("*.pt")} == before  # no new file, none changed
    # The user's config, not run/config.yaml: a resume records its --set values there.
    again = invoke("train", "--config", config, "--no-progress", "--resume",
                   "--set", "train.max_steps=5")  # fmt: skip
    assert again.exit_code == 0, again.stderr
    assert "resumed from" in again.stderr and "step-00000003.pt at step 3" in again.stderr
    assert load_checkpoint(run / "last.pt")["step"] == 5
    assert non_finite_files(run) == []


def test_eval_and_translate_refuse_a_model_file_with_non_finite_weights(copy_of_trained_run):
    run = copy_of_trained_run
    state = torch.load(run / "best.pt", weights_only=True)
    state.pop("content_sha256")  # as an older tfm wrote it, without the check
    next(iter(state["model"].values()))[0] = float("nan")
    atomic_save(state, run / "best.pt")

    for command in (["translate", "a dog"], ["eval", "--json"]):
        result = invoke(*command, "--run", run)
        assert result.exit_code == 1 and result.stdout == ""
        line = error_line(result.stderr)
        assert f"{run / 'best.pt'} cannot be used: state['model']" in line
        assert "is not finite" in line

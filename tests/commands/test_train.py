"""`tfm train` as a newcomer and a script meet it: a log that says what is trained (the config's
changes, the first pair in subword pieces) in plain lines when stderr is a file, TensorBoard
files, a curve even for a short run, a time limit that never passes silently, and mistakes that
leave the run directory as it was."""

import json
import re

import pytest
from builders import tiny_config
from typer.testing import CliRunner

from tfm.cli import app
from tfm.commands import train as train_command
from tfm.config import to_yaml
from tfm.visual import curves


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def write_config(path, config) -> str:
    path.write_text(to_yaml(config), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """A 3-step run with a log window of 2 steps, progress on (stderr is not a terminal)."""
    where = tmp_path_factory.mktemp("train")
    # threads left to tfm (null), so that the log says how it chose them
    config = tiny_config(where / "run", max_steps=3, log_every=2, validate_every=3, threads=None)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(where)
        result = invoke("train", "--config", write_config(where / "c.yaml", config))
    assert result.exit_code == 0, result.output
    return result, where / "run"


def test_the_log_is_plain_lines_that_say_what_is_trained(logged):
    result, _ = logged
    log = result.stderr
    assert "\r" not in log and not [line for line in log.splitlines() if not line.strip()]
    assert "config, where it differs from the defaults:\n" in log
    assert "\n  model.d_model: 16\n" in log and "\n  train.max_steps: 3\n" in log
    assert "\n  train.lr:" not in log  # at its default
    pair = re.search(r"first training pair in subword pieces:\n  src: (.*)\n  tgt: (.*)\n", log)
    assert pair and pair.group(1).endswith(" </s>") and pair.group(2).startswith("<s> ▁")
    assert re.search(r"\nstep 2/3 \(epoch 1\): loss [\d.]+, lr [\d.e+-]+, [\d,]+ tokens/s, "
                     r"0:00:\d\d elapsed, ~0:00:\d\d left\n", log)  # fmt: skip
    assert re.search(r"\nthreads: \d+ \((OMP_NUM_THREADS=\d+|auto: \d+ physical core)", log)


def test_tensorboard_event_files_hold_the_metrics(logged):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    )
    _, run = logged
    events = event_accumulator.EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train_loss", "lr", "tokens_per_s", "val_loss", "val_bleu", "val_chrf"} <= tags
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    logged_losses = [(e["step"], e["train_loss"]) for e in metrics if "train_loss" in e]
    written = events.Scalars("train_loss")  # step 2, and the last step's partial window
    assert [(e.step, pytest.approx(e.value)) for e in written] == logged_losses
    assert [e.step for e in written] == [2, 3]


def test_a_resumed_run_replaces_the_tensorboard_events_after_its_checkpoint(tmp_path):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    )
    from tfm.training import train

    run = tmp_path / "run"
    train(tiny_config(run, max_steps=3, log_every=1, checkpoint_every=2), progress_bar=False)
    (run / "checkpoints" / "step-00000003.pt").unlink()  # as if killed after step 3's events
    train(tiny_config(run, max_steps=4, log_every=1), resume=True, progress_bar=False)
    events = event_accumulator.EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    logged = [(e["step"], e["train_loss"]) for e in metrics if "train_loss" in e]
    assert [e["step"] for e in metrics if "train_loss" in e] == [1, 2, 3, 4]
    written = events.Scalars("train_loss")
    assert [(e.step, pytest.approx(e.value)) for e in written] == logged


def test_tensorboard_missing_is_said_once_and_training_goes_on(tmp_path, monkeypatch):
    from tfm.training import tensorboard

    monkeypatch.setattr(tensorboard.importlib.util, "find_spec", lambda name: None)
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path / "c.yaml", tiny_config(tmp_path / "run", max_steps=1))
    result = invoke("train", "--config", config, "--no-progress")
    assert result.exit_code == 0, result.output
    assert result.stderr.count("the tensorboard package is not installed") == 1
    assert not (tmp_path / "run" / "tensorboard").exists()


def test_a_run_shorter_than_a_log_window_still_plots_its_training_loss(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tiny_config(tmp_path / "run", max_steps=3, log_every=50, tensorboard=False)
    assert invoke("train", "--config", write_config(tmp_path / "c.yaml", config),
                  "--no-progress").exit_code == 0  # fmt: skip
    drawn = []
    monkeypatch.setattr(curves, "save_figure", lambda figure, path: drawn.append(figure) or path)
    assert invoke("plot", "--run", str(tmp_path / "run")).exit_code == 0
    loss_panel = drawn[0].axes[0]
    [training] = [line for line in loss_panel.get_lines() if line.get_label().startswith("train")]
    assert list(training.get_xdata()) == [3] and training.get_marker() == "o"


def test_a_time_limit_that_leaves_no_usable_model_fails_loudly_and_says_how_to_resume(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    cut = tiny_config(tmp_path / "run", max_steps=4, max_minutes=1e-4, tensorboard=False)
    config = write_config(tmp_path / "c.yaml", cut)
    result = invoke("train", "--config", config, "--no-progress")
    assert result.exit_code == 1
    assert "!!! TRAINING CUT SHORT: the time limit train.max_minutes=0.0001 stopped training at " \
        "step 1 of the 4 planned (validation BLEU " in result.stderr  # fmt: skip
    assert "!!! The model is NOT usable yet: validation BLEU " in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("tfm: error: the time limit train.max_minutes=0.0001 stopped")
    command = re.search(r"resume without the time limit:\n  (tfm train .*)\n", result.stderr)
    assert command.group(1) == f"tfm train --config {config} --resume --set train.max_minutes=null"
    resumed = invoke(*command.group(1).split()[1:], "--no-progress")
    assert resumed.exit_code == 0, resumed.output
    assert "done: 4 steps (max_steps)" in resumed.stderr


def test_a_time_limit_with_a_usable_model_warns_and_succeeds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(train_command, "unusable_model", lambda bleu, findings: None)
    cut = tiny_config(tmp_path / "run", max_steps=4, max_minutes=1e-4, tensorboard=False)
    result = invoke("train", "--config", write_config(tmp_path / "c.yaml", cut), "--no-progress")
    assert result.exit_code == 0, result.output
    assert "!!! TRAINING CUT SHORT" in result.stderr and "!!! It is under-trained" in result.stderr
    assert result.stdout.strip() == str(tmp_path / "run")


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        (["--device", "cuda"], "device 'cuda' was asked for"),
        (["--set", "data.train={format: text, path: nowhere/train}"], "nowhere/train.en: no such"),
    ],
)
def test_a_mistake_leaves_no_run_directory_and_the_fixed_command_works(
    tmp_path, monkeypatch, mistake, message
):
    import torch

    if "cuda" in mistake and torch.cuda.is_available():
        pytest.skip("this machine has the GPU that the mistake asks for")
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path / "c.yaml", tiny_config(tmp_path / "run", max_steps=1))
    failed = invoke("train", "--config", config, "--no-progress", *mistake)
    assert failed.exit_code == 2 and message in failed.stderr
    assert not (tmp_path / "run").exists()
    (tmp_path / "run").mkdir()  # what an earlier version left: a failed start's config.yaml
    (tmp_path / "run" / "config.yaml").write_text("run_dir: run\n")
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    assert (tmp_path / "run" / "last.pt").is_file()


def write_pairs(prefix, **sides: str) -> None:
    """40 numbered lines in `prefix`.LANG for each language and its words (format text)."""
    for lang, words in sides.items():
        lines = "".join(f"{words} {i}\n" for i in range(40))
        prefix.with_name(f"{prefix.name}.{lang}").write_text(lines, encoding="utf-8")


@pytest.mark.parametrize("command", [["train", "--no-progress"], ["config", "show"],
                                     ["data", "check"]])  # fmt: skip
@pytest.mark.parametrize("removed", [["validation.de"], ["validation.en", "validation.de"]])
def test_a_missing_validation_file_is_named_before_the_training_split_is_prepared(
    tmp_path, monkeypatch, command, removed
):
    """A mistyped validation path costs no BPE and no preparation of the training split first:
    the one line names the first missing file and the key, and nothing is written."""
    monkeypatch.chdir(tmp_path)
    for split in ("train", "validation"):
        write_pairs(tmp_path / split, en="the dog", de="der Hund")
    for name in removed:
        (tmp_path / name).unlink()
    text = {"format": "text"}
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"run_dir": "run", "data": {
        "train": {**text, "path": "train"}, "validation": {**text, "path": "validation"},
        "test": {**text, "path": "validation"}}}), encoding="utf-8")  # fmt: skip
    result = invoke(*command, "--config", str(config))
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr.splitlines()[-1] == (
        f"tfm: error: {removed[0]}: no such file (check data.validation.path is 'validation'; "
        "format 'text' reads validation.en and validation.de)"
    )
    assert "BPE" not in result.stderr and "prepared" not in result.stderr
    kept = {"c.yaml", "train.en", "train.de", "validation.en", "validation.de"} - set(removed)
    assert {p.name for p in tmp_path.iterdir()} == kept  # no run, no data cache


def test_a_missing_dataset_folder_is_named_before_the_training_split_is_prepared(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    write_pairs(tmp_path / "train", en="the dog", de="der Hund")
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"run_dir": "run", "data": {
        "train": {"format": "text", "path": "train"},
        "validation": {"format": "disk", "path": "saved"}}}), encoding="utf-8")  # fmt: skip
    result = invoke("config", "show", "--config", str(config))
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr.splitlines()[-1] == (
        "tfm: error: saved: no such folder (check data.validation.path)"
    )
    assert "BPE" not in result.stderr and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", [["train", "--no-progress"], ["config", "show"],
                                     ["data", "check"]])  # fmt: skip
def test_a_corpus_too_small_to_hold_out_validation_is_named_before_anything_is_written(
    tmp_path, monkeypatch, command
):
    """A config that names no validation split holds one out of the training corpus: where the
    corpus is too small for that, it is said once the one pass over it is over, before BPE,
    and nothing is left behind."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.en").write_text("the dog\n", encoding="utf-8")
    (tmp_path / "train.fr").write_text("le chien\n", encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"run_dir": "run", "data": {
        "src_lang": "en", "tgt_lang": "fr", "train": {"format": "text", "path": "train"}}}),
        encoding="utf-8")  # fmt: skip
    result = invoke(*command, "--config", str(config))
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr.splitlines()[-1] == (
        "tfm: error: data.train (train.{en,fr}) has 1 pair: too few to hold out 1 for validation "
        "and test and train on the rest; give data.validation and data.test (or a smaller "
        "`pairs`)"
    )
    assert "BPE" not in result.stderr and "prepared" not in result.stderr
    assert {p.name for p in tmp_path.iterdir()} == {"c.yaml", "train.en", "train.fr"}


@pytest.mark.parametrize(
    ("world_size", "launcher"), [(1, "tfm"), (2, "torchrun --nproc_per_node=2 -m tfm")]
)
def test_the_resume_command_after_an_interruption_is_the_way_the_run_was_started(
    tmp_path, monkeypatch, caplog, world_size, launcher
):
    from tfm.commands import train as command
    from tfm.training import TrainResult
    from tfm.training.distributed import Replicas

    config = tmp_path / "c.yaml"
    config.write_text(f"run_dir: {tmp_path / 'run'}\n", encoding="utf-8")
    replicas = Replicas(rank=0, world_size=world_size, local_rank=0)
    monkeypatch.setattr(command, "from_environment", lambda: replicas)
    interrupted = TrainResult(run_dir=str(tmp_path / "run"), steps=7, epochs_completed=0,
                              stopped_because="interrupted", best_score=None, best_step=None,
                              interrupted_by="SIGTERM")  # fmt: skip
    monkeypatch.setattr(command, "train", lambda *args, **kwargs: interrupted)
    with caplog.at_level("INFO", logger="tfm"):
        outcome = command.train_run(config, progress=False)
    assert outcome.exit_code == 143
    assert f"  {launcher} train --config {config} --resume" in caplog.text

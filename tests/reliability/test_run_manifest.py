"""The run's own text files are covered by digests: an edited tokenizer.json or config.yaml is
refused in one line naming the file by every command that opens the run, an empty config.yaml too;
a data cache whose arrays changed is prepared again instead of training on them."""

import importlib.util
import json
import shutil

import numpy as np
import pytest
import torch
from attack_helpers import error_line, invoke, resume
from builders import tiny_config_file

from tfm.rundir.manifest import MANIFEST_FILE


def edit(path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


def opened_by(run, *, average: bool = True) -> list:
    """What each command that opens the run (and uses its model file: all but average) reports
    for it."""
    commands = [
        ["translate", "--run", run, "a dog"],
        ["eval", "--run", run, "--json"],
        ["attention", "--run", run, "a dog", "--out", run.parent / "a.png"],
    ]
    if importlib.util.find_spec("ctranslate2") is not None:  # the deploy extra
        commands.append(["export", "--run", run, "--out", run.parent / "ct2"])
    if average:
        commands.append(["average", "--run", run, "--last", "2", "--out", run.parent / "avg"])
    return [invoke(*command) for command in commands]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"content": " "', '"content": "_"'),  # the normalizer's whitespace rule
        ('"individual_digits": false', '"individual_digits": true'),  # the pre-tokenizer
        ('["e", "n"]', '["n", "e"]'),  # a merge
    ],
    ids=["normalizer", "pre-tokenizer", "merges"],
)
def test_an_edited_tokenizer_is_refused_by_every_command(copy_of_trained_run, old, new):
    run = copy_of_trained_run
    tokenizer = run / "tokenizer.json"
    if old not in tokenizer.read_text(encoding="utf-8"):
        pytest.skip(f"{old} is not in this tokenizer")
    edit(tokenizer, old, new)
    for result in opened_by(run):
        assert result.exit_code == 1 and result.stdout == ""
        line = error_line(result.stderr)
        assert f"{tokenizer} was changed after the run wrote it" in line
        assert f"delete {MANIFEST_FILE} to use the run as it is now" in line
    assert not (run.parent / "avg").exists()
    result = resume(run, "train.max_steps=210")
    assert result.exit_code == 1 and f"{tokenizer} was changed" in error_line(result.stderr)


def test_a_changed_value_in_config_yaml_is_refused_a_reformatting_is_not(copy_of_trained_run):
    run = copy_of_trained_run
    config = run / "config.yaml"
    original = config.read_text(encoding="utf-8")
    config.write_text("# a comment\n" + original.replace("\n", "\n\n"), encoding="utf-8")
    assert invoke("translate", "--run", run, "a dog").exit_code == 0

    edit(config, "max_len_b: 5", "max_len_b: 6")
    for result in opened_by(run):
        assert result.exit_code == 1
        assert f"{config} was changed after the run wrote it" in error_line(result.stderr)

    (run / MANIFEST_FILE).unlink()  # the way to use a run changed on purpose
    assert invoke("translate", "--run", run, "a dog").exit_code == 0


def test_an_empty_config_yaml_is_refused_with_or_without_the_manifest(copy_of_trained_run):
    run = copy_of_trained_run
    (run / "config.yaml").write_text("", encoding="utf-8")
    result = invoke("eval", "--run", run, "--json")
    assert result.exit_code == 1 and "config.yaml was changed" in error_line(result.stderr)
    (run / MANIFEST_FILE).unlink()
    result = invoke("eval", "--run", run, "--json")
    assert result.exit_code == 2 and result.stdout == ""
    assert "config.yaml is empty: a run's config.yaml holds every setting" in error_line(
        result.stderr
    )


def test_resume_and_average_keep_the_manifest_true(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=2, validate_every=1)
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    run = tmp_path / "run"
    result = resume(run, "train.max_steps=3", "decoding.beam_size=2")  # config.yaml rewritten
    assert result.exit_code == 0, result.stderr
    files = json.loads((run / MANIFEST_FILE).read_text())["files"]
    # confidence.json: the map fitted again for the resumed run's best.pt (tfm.commands.calibrate)
    assert set(files) == {"config.yaml", "tokenizer.json", "best.pt", "last.pt", "confidence.json"}
    assert all(len(digests) == 1 for digests in files.values())
    assert files["last.pt"] == [load_checkpoint_digest(run / "last.pt")]
    assert invoke("eval", "--run", run, "--json").exit_code == 0
    assert invoke("average", "--run", run, "--last", "2", "--out", tmp_path / "avg").exit_code == 0
    assert (tmp_path / "avg" / MANIFEST_FILE).is_file()
    assert invoke("eval", "--run", tmp_path / "avg", "--json").exit_code == 0


def load_checkpoint_digest(path) -> str:
    return torch.load(path, weights_only=True)["content_sha256"]


def test_another_run_s_model_file_is_refused(tmp_path):
    """Same data and tokenizer, another seed: its best.pt passes every other check."""
    for seed in (0, 1):
        config = tiny_config_file(tmp_path, name=f"seed{seed}", max_steps=2, validate_every=2,
                                  seed=seed)  # fmt: skip
        assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    run = tmp_path / "seed0"
    shutil.copy(tmp_path / "seed1" / "best.pt", run / "best.pt")
    for result in opened_by(run, average=False):  # average reads the checkpoints, not best.pt
        assert result.exit_code == 1
        assert f"{run / 'best.pt'} was changed after the run wrote it" in error_line(result.stderr)


@pytest.mark.parametrize("value", [5, 255], ids=["in range", "out of range"])  # vocabulary: 150
def test_a_changed_data_cache_is_prepared_again_not_trained_on(tmp_path, value):
    config = tiny_config_file(tmp_path, max_steps=1, validate_every=1)
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    (entry,) = (tmp_path / ".tfm-cache").glob("*/meta.json")
    ids = entry.parent / "src.ids"
    dtype = np.dtype(json.loads(entry.read_text())["dtypes"]["src"])
    values = np.fromfile(ids, dtype=dtype)
    values[3] = value if values[3] != value else value + 1
    values.tofile(ids)

    result = invoke("train", "--config", config, "--no-progress", "--overwrite")
    assert result.exit_code == 0, result.stderr
    assert f"{entry.parent}: src.ids changed since it was prepared; preparing it again" in (
        result.stderr
    )
    assert np.fromfile(ids, dtype=dtype)[3] != value

"""Messages that name what the user can actually do, and config files that cannot hang or exhaust
memory: each case is one line, with the right exit code, found before anything is written."""

import os
import time

import pytest
from attack_helpers import error_line, invoke, resume
from builders import tiny_config_file

from tfm.config import MAX_CONFIG_BYTES


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda path: "/dev/zero", "config file /dev/zero is not a regular file"),
        (lambda path: os.mkfifo(path) or path, "is not a regular file; give a YAML file"),
        (
            lambda path: (path.write_text("a: [" + "1," * MAX_CONFIG_BYTES + "]\n"), path)[1],
            "is larger than 1 MB; a config is a few kilobytes",
        ),
    ],
    ids=["device", "fifo", "2 MB"],
)
def test_a_config_that_is_no_file_or_too_large_is_refused_before_reading(tmp_path, make, expected):
    config = make(tmp_path / "config.yaml")
    started = time.monotonic()
    result = invoke("train", "--config", config)
    assert time.monotonic() - started < 2.0
    assert result.exit_code == 2
    assert expected in error_line(result.stderr)


def test_a_set_that_replaced_a_section_is_blamed_not_the_option_after_it(tmp_path):
    config = tiny_config_file(tmp_path)
    result = invoke("train", "--config", config, "--set", "train=5", "--threads", "1")
    assert result.exit_code == 2
    line = error_line(result.stderr)
    assert line.startswith("tfm: error: --set 'train=5': 'train' is a section, not a value")
    assert "threads" not in line
    assert not (tmp_path / "run").exists()


def test_divergence_before_any_checkpoint_does_not_advise_resuming(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=3, validate_every=3, lr=1e39)
    result = invoke("train", "--config", config, "--no-progress")
    assert result.exit_code == 1
    line = error_line(result.stderr)
    assert "is not finite, so nothing was written" in line
    assert "no checkpoint was written before it: start again with a lower train.lr" in line
    assert "resume" not in line
    assert not list((tmp_path / "run").glob("**/*.pt"))


def test_divergence_after_a_checkpoint_names_it(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=2, validate_every=2)
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    result = resume(tmp_path / "run", "train.max_steps=4", "train.lr=1e39")
    assert result.exit_code == 1
    assert "resume from the checkpoint of step 2 (--resume) with a lower train.lr" in error_line(
        result.stderr
    )


def test_export_for_cuda_without_a_gpu_says_there_is_no_gpu(trained_run, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    if ctranslate2.get_cuda_device_count() > 0:
        pytest.skip("this machine has a CUDA GPU")
    result = invoke("export", "--run", trained_run, "--out", tmp_path / "ct2", "--device", "cuda")
    assert result.exit_code == 2
    line = error_line(result.stderr)
    assert "--device cuda: CTranslate2 finds no CUDA GPU on this machine" in line
    assert "driver" not in line
    assert not (tmp_path / "ct2").exists()

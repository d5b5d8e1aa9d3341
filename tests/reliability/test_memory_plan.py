"""A model too big for the machine is refused in one line with the figures, before anything is
built or written: `--overwrite` deletes nothing then. Paths no file system takes are one line."""

import pytest
from attack_helpers import error_line, invoke
from builders import tiny_config_file

from tfm.training.recipe import memory
from tfm.training.recipe.memory import (
    STATE_BYTES_PER_PARAMETER,
    estimate_training_bytes,
    estimate_training_memory,
)
from tfm.transformer import ModelArgs, build_model

HUGE = ("model.d_model=8192", "model.d_ff=65536", "model.n_encoder_layers=24")


def run_files(run):
    return {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_a_model_that_cannot_fit_is_refused_before_overwrite_deletes_anything(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=2, validate_every=2)
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    run = tmp_path / "run"
    before = run_files(run)

    sets = [arg for key_value in HUGE for arg in ("--set", key_value)]
    result = invoke("train", "--config", config, "--no-progress", "--overwrite", *sets)

    assert result.exit_code == 2
    line = error_line(result.stderr)
    assert "training this model needs about 559.8 GB of memory (33,827,627,008 parameters" in line
    assert "is available on cpu; use a smaller model" in line
    assert run_files(run) == before


def test_the_plan_is_refused_against_the_memory_available(tmp_path, monkeypatch):
    """The tiny model passes with memory to spare and is refused with less than it needs."""
    config = tiny_config_file(tmp_path, max_steps=1, validate_every=1)
    monkeypatch.setattr(memory, "available_bytes", lambda device: 10**6)
    result = invoke("train", "--config", config, "--no-progress")
    assert result.exit_code == 2
    assert "but only 1.0 MB is available on cpu" in error_line(result.stderr)
    assert not (tmp_path / "run").exists()
    monkeypatch.setattr(memory, "available_bytes", lambda device: 10**8)
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0


@pytest.mark.parametrize("tie", [True, False])
def test_the_estimate_counts_the_model_s_parameters_and_grows_with_the_batch(tie):
    sizes = {"d_model": 32, "n_heads": 2, "n_encoder_layers": 2, "n_decoder_layers": 1, "d_ff": 64}
    args = ModelArgs(src_vocab_size=300, tgt_vocab_size=300, share_embeddings=tie, **sizes)
    model = build_model(args)
    parameters = sum(p.numel() for p in model.parameters())
    small, large = estimate_training_memory(args, 1000), estimate_training_memory(args, 2000)
    assert small.parameters == parameters
    assert small.state == large.state == parameters * STATE_BYTES_PER_PARAMETER
    # Activations: (2 encoder layers · (12·32 + 2·64) + 1 · 2·32 + 2·32) per source token,
    # (1 decoder layer · (14·32 + 2·64) + 2·32) per target token, 3 · 1000 · 300 for the loss.
    per_token = 2 * (12 * 32 + 2 * 64) + 2 * 32 + 2 * 32 + (14 * 32 + 2 * 64) + 2 * 32
    assert small.activations == 4 * (1000 * per_token + 3 * 1000 * 300)
    assert large.activations == 4 * (2000 * per_token + 3 * 1024 * 300)
    assert estimate_training_bytes(args, 1000) == small.state + small.activations


def test_a_run_dir_name_too_long_for_the_file_system_is_one_line(tmp_path):
    config = tiny_config_file(tmp_path)
    long_dir = tmp_path / ("x" * 300) / "run"
    result = invoke("train", "--config", config, "--set", f"run_dir={long_dir}")
    assert result.exit_code == 2
    line = error_line(result.stderr)
    assert "run_dir 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…': a name in the path is 300" in line
    for command in (["eval"], ["translate", "a dog"]):
        result = invoke(*command, "--run", long_dir)
        assert result.exit_code == 2
        assert "a name in the path is 300 bytes long, more than the 255" in error_line(
            result.stderr
        )

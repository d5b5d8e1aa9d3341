"""Hostile configs and options: an alias bomb, deep nesting and absurd sizes are one-line errors
(exit 2) that name the key, the value and the bound, found at once, before anything is built."""

import time

import pytest
import yaml
from attack_helpers import error_line, invoke

from tfm.config import load_config, read_yaml
from tfm.errors import ConfigError


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """YAML whose last alias expands to width**levels strings ("billion laughs")."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (alias_bomb(), "bomb.yaml:6: the aliases here expand to more than 100000 values"),
        ("model: " + "[" * 3000 + "]" * 3000 + "\n", "bomb.yaml:1: nested more than 64 levels"),
        ("train: &loop {seed: [1, *loop]}\n", "an alias refers to a list or mapping that contains"),
    ],
    ids=["alias bomb", "3000 nested lists", "recursive alias"],
)
def test_hostile_yaml_is_a_fast_one_line_error(tmp_path, text, expected):
    (tmp_path / "bomb.yaml").write_text(text)
    started = time.monotonic()
    with pytest.raises(ConfigError):
        load_config(tmp_path / "bomb.yaml")
    assert time.monotonic() - started < 1.0
    result = invoke("train", "--config", tmp_path / "bomb.yaml")
    assert result.exit_code == 2
    assert expected in error_line(result.stderr)


@pytest.mark.parametrize(
    "text", ["[" * 3000, "{a: " * 3000, "".join("  " * i + "-\n" for i in range(99))]
)
def test_deep_nesting_is_one_line_without_libyaml_too(monkeypatch, text):
    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)  # the pure-Python parser alone
    with pytest.raises(ConfigError, match=r"^<text>:\d+: nested more than 64 levels deep"):
        read_yaml(text, "<text>")


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("model.d_model=1e9", "model.d_model: expected an integer from 8 to 16384 "
         "(found 1000000000.0)"),
        ("model.max_len=1e8", "model.max_len: expected an integer from 8 to 65536"),
        ("model.d_ff=1e10", "model.d_ff: expected an integer from 1 to 131072"),
        ("model.n_encoder_layers=1000", "model.n_encoder_layers: input should be less than or "
         "equal to 128 (found 1000)"),
        ("model.n_encoder_layers=1e30", "model.n_encoder_layers: unable to parse input string "
         "as an integer, exceeded maximum size (found 1e+30)"),
        ("decoding.beam_size=100000", "decoding.beam_size: expected an integer from 1 to 1000 "
         "(found 100000)"),
        ("decoding.seed=" + "1" * 5000, "decoding.seed: expected an integer from 0 to "
         "4294967295 (found inf)"),  # more digits than int() reads
        ("decoding.length_penalty=.nan", "decoding.length_penalty: expected a number from 0 to "
         "10 (found nan)"),
        ("decoding.temperature=1e-39", "decoding.temperature: expected a number from 0.01 to "
         "100 (found 1e-39)"),
        ("train.betas=[2,2]", "train.betas[0]: input should be less than 1 (found 2)"),
        ("train.seed=100000000000000000000000000", "train.seed: expected an integer from 0 to "
         "4294967295 (found 100000000000000000000000000)"),
        ("tokenizer.vocab_size=1e9", "tokenizer.vocab_size: expected an integer from 64 to "
         "1000000 (found 1000000000.0)"),
        ("train.max_tokens=1e12", "train.max_tokens: expected an integer from 16 to 10000000"),
        ("train.lr=.nan", "train.lr: input should be a finite number (found nan)"),
    ],
)  # fmt: skip
def test_absurd_values_name_the_key_the_value_and_the_bound(tmp_path, override, expected):
    result = invoke("train", "--config", tmp_path / "absent.yaml", "--set", override)
    assert result.exit_code == 2
    assert "does not exist" in result.stderr  # a missing file is found first...
    config = tmp_path / "empty.yaml"
    config.write_text(f"run_dir: {tmp_path / 'run'}\n")
    result = invoke("train", "--config", config, "--set", override)
    assert result.exit_code == 2
    assert f"--set {override}: {expected}" in result.stderr  # ...then every bad value, a line each
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("option", "expected"),
    [("--beam-size", "from 1 to 1000"), ("--n-best", "less than or equal to 1000")],
)
def test_the_command_line_bounds_the_beam_as_the_schema_does(option, expected):
    result = invoke("translate", option, "100000", "a dog")
    assert result.exit_code == 2
    assert expected in result.stderr

"""`tfm config show`: the whole effective configuration as YAML that reads back as the same
configuration, each key with its description; and the changed keys that training logs."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tfm.cli import app
from tfm.config import Config, load_config, read_yaml
from tfm.config.reference import config_keys
from tfm.config.show import changed_keys, yaml_value

TOY = str(Path(__file__).resolve().parents[2] / "configs" / "toy.yaml")


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_defaults_list_every_key_with_its_description_and_read_back(tmp_path):
    result = invoke("config", "show", "--defaults")
    assert result.exit_code == 0, result.output
    text = result.stdout
    (tmp_path / "all.yaml").write_text(text, encoding="utf-8")
    assert load_config(tmp_path / "all.yaml") == Config()
    data, _ = read_yaml(text, "shown")
    for key in config_keys():
        path = key.path.replace("<split>", "train").split(".")
        node = data
        for part in path:
            if part.endswith("[i]"):  # a list's items: an empty list by default
                assert node[part.removesuffix("[i]")] == []
                break
            node = node[part]  # KeyError: a key the output leaves out
    assert "# Peak learning rate, reached at the end of warm-up;" in text
    assert "# default:" not in text


def test_a_config_and_sets_show_what_training_would_use(tmp_path):
    result = invoke("config", "show", "--config", TOY, "--set", "train.max_steps=7", "--no-plan")
    assert result.exit_code == 0, result.output
    (tmp_path / "shown.yaml").write_text(result.stdout, encoding="utf-8")
    expected = load_config(TOY, ["train.max_steps=7"])
    assert load_config(tmp_path / "shown.yaml") == expected
    assert "  max_steps: 7  # default: null\n" in result.stdout
    assert "  d_model: 128  # default: null\n" in result.stdout
    plain = invoke("config", "show", "--config", TOY, "--no-comments", "--no-plan").stdout
    assert "#" not in plain and "  d_model: 128\n" in plain


def test_defaults_with_a_config_is_a_usage_error():
    result = invoke("config", "show", "--defaults", "--config", TOY)
    assert result.exit_code == 2
    assert result.stderr == "tfm: error: --defaults shows the schema's defaults; leave out " \
        "--config and --set\n"  # fmt: skip


def test_changed_keys_are_exactly_those_off_their_default():
    config = load_config(TOY, ["data.train={format: tsv, path: t.tsv, columns: [en, de]}"])
    changed = dict(changed_keys(config))
    assert changed["run_dir"] == "runs/toy" and changed["model.d_model"] == "128"
    assert changed["data.train.format"] == "tsv" and changed["data.train.columns"] == "[en, de]"
    assert changed["train.lr"] == "0.002" and changed["data.validation.format"] == "held_out"
    assert "data.validation.pairs" not in changed and "data.toy.seed" not in changed
    assert "train.seed" not in changed and "data.train.name" not in changed
    assert changed_keys(Config()) == []


@pytest.mark.parametrize("text", ["no", "1e-4", "a # b", "", "true", "[x]", "runs/toy", "ünï"])
def test_strings_read_back_as_the_same_strings(text):
    assert read_yaml(yaml_value(text), "value")[0] == text

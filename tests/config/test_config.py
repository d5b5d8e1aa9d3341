"""The config schema: defaults, YAML traps, overrides, and errors that name key, line and value."""

from pathlib import Path

import pytest

from tfm.config import RECIPE_KEYS, Config, load_config, to_yaml
from tfm.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def error_lines(path: Path | None, overrides: tuple[str, ...] = ()) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return str(info.value).splitlines()


def test_defaults_follow_the_paper_and_recipe_keys_have_none():
    c = load_config(None)
    assert c.train.betas == (0.9, 0.98) and c.train.eps == 1e-9
    assert c.model.norm_position == "post"
    assert c.data.train.format == "toy"
    # a key the recipe derives is either given or derived: no default stands in for it
    for section, keys in RECIPE_KEYS.items():
        for key in keys:
            assert getattr(getattr(c, section), key) is None, f"{section}.{key}"


def test_scientific_notation_is_a_number_and_language_no_stays_a_string(tmp_path):
    path = write(tmp_path, "data:\n  src_lang: no\n  tgt_lang: en\ntrain:\n  lr: 1e-4\n")
    c = load_config(path)
    assert c.train.lr == pytest.approx(1e-4)
    assert c.data.src_lang == "no"


def test_misspelt_key_gets_a_suggestion_with_its_line(tmp_path):
    path = write(tmp_path, "train:\n  seed: 1\n  max_step: 10\n")
    (line,) = error_lines(path)
    assert line == f"{path}:3: unknown key 'train.max_step'; did you mean 'max_steps'?"


def test_unknown_section_lists_valid_keys(tmp_path):
    path = write(tmp_path, "trainer:\n  seed: 1\n")
    (line,) = error_lines(path)
    assert "unknown key 'trainer'" in line and "did you mean 'train'" in line


def test_all_errors_are_reported_at_once_with_type_and_value(tmp_path):
    path = write(tmp_path, "train:\n  seed: abc\n  max_tokens: 3\nmodel:\n  dropot: 0.2\n")
    lines = error_lines(path)
    assert len(lines) == 3
    assert any(line.startswith(f"{path}:2: train.seed") and "'abc'" in line for line in lines)
    assert any(f"{path}:3: train.max_tokens" in line and "16" in line for line in lines)
    assert any("did you mean 'dropout'" in line for line in lines)


def test_cross_field_rule_names_both_values(tmp_path):
    path = write(tmp_path, "model:\n  d_model: 100\n  n_heads: 3\n")
    (line,) = error_lines(path)
    assert "d_model=100 is not divisible by n_heads=3" in line


def test_duplicate_keys_are_an_error_with_both_lines(tmp_path):
    path = write(tmp_path, "train:\n  seed: 1\n  seed: 2\n")
    (line,) = error_lines(path)
    assert line == f"{path}:3: duplicate key 'seed' (first at line 2)"


def test_set_overrides_are_typed_by_the_schema(tmp_path):
    path = write(tmp_path, "train:\n  max_steps: 5\n")
    c = load_config(path, ["train.max_steps=7", "model.activation=gelu", "train.lr=3e-4"])
    assert c.train.max_steps == 7 and c.model.activation == "gelu"
    assert c.train.lr == pytest.approx(3e-4)


def test_bad_set_override_names_the_option():
    (line,) = error_lines(None, ("train.max_epochs=0",))
    assert line.startswith("--set train.max_epochs=0: train.max_epochs")
    (line,) = error_lines(None, ("train.maxsteps=3",))
    assert "did you mean 'max_steps'" in line
    (line,) = error_lines(None, ("nonsense",))
    assert "expected section.key=value" in line


def test_an_unknown_section_in_a_set_names_the_set_not_the_file(tmp_path):
    path = write(tmp_path, "train:\n  max_steps: 5\n")
    (line,) = error_lines(path, ("train.max_steps=6", "nosuch.key=1"))
    assert line.startswith("--set nosuch.key=1: unknown key 'nosuch'; valid keys: run_dir, data")
    (line,) = error_lines(path, ("data.nosuch.deeper.key=1",))
    assert line.startswith("--set data.nosuch.deeper.key=1: unknown key 'data.nosuch'")


def test_missing_and_invalid_files(tmp_path):
    (line,) = error_lines(tmp_path / "nope.yaml")
    assert "does not exist" in line and "nope.yaml" in line
    (line,) = error_lines(write(tmp_path, "train: [1, 2\n"))
    assert "not valid YAML" in line
    (line,) = error_lines(write(tmp_path, "- 1\n- 2\n"))
    assert "expected a mapping" in line


def test_source_format_needs_its_keys(tmp_path):
    path = write(tmp_path, "data:\n  train:\n    format: text\n")
    (line,) = error_lines(path)
    assert "data.train" in line and "needs 'path'" in line


def test_resolved_yaml_round_trips():
    c = load_config(None, ["train.max_steps=3"])
    assert Config.model_validate(__import__("yaml").safe_load(to_yaml(c))) == c


def test_shipped_configs_are_valid():
    root = Path(__file__).resolve().parents[2] / "configs"
    files = sorted(root.glob("*.yaml"))
    assert files, "no configs shipped"
    for path in files:
        load_config(path)


def test_a_run_translates_the_reverse_only_when_every_epoch_trained_both_ways():
    def config(*sets: str) -> Config:
        return load_config(None, ("data.src_lang=en", "data.tgt_lang=de", *sets))

    plain = config()
    assert plain.translates("en", "de") and not plain.translates("de", "en")
    both = config("train.max_epochs=20", "train.bidirectional_epochs=20")
    assert both.translates("en", "de") and both.translates("de", "en")
    assert config("train.max_epochs=20", "train.bidirectional_epochs=25").translates("de", "en")
    early = config("train.max_epochs=20", "train.bidirectional_epochs=19")  # BiT: 20th one way
    assert not early.translates("de", "en")
    unbounded = config("train.max_epochs=null", "train.max_steps=9", "train.bidirectional_epochs=5")
    assert not unbounded.translates("de", "en")  # epochs past the 5th may come: one way only
    assert not both.translates("en", "fr") and not both.translates("de", "de")


def test_a_cosine_decay_given_no_length_is_refused_at_load(tmp_path):
    # left out, the recipe plans it; given as null, training would fail after the warm-up
    (line,) = error_lines(None, ("train.schedule=cosine", "train.decay_steps=null"))
    assert line.startswith("--set train.decay_steps=null: train.decay_steps: null with train.")
    assert "schedule: cosine: leave decay_steps out" in line
    path = write(tmp_path, "train:\n  schedule: cosine\n  decay_steps: null\n")
    assert error_lines(path)[0].startswith(f"{path}, line 3: train.decay_steps: null with")
    assert load_config(None, ["train.schedule=cosine"]).train.decay_steps is None  # to plan


@pytest.mark.parametrize("text", ["", "# data: to come\n"])
def test_an_empty_file_is_all_defaults_and_says_so(tmp_path, caplog, text):
    """An empty file trains the toy corpus: more often a mistake than a choice, so it is named;
    `{}` says "all defaults" on purpose and is not."""
    assert load_config(write(tmp_path, text)) == load_config(None)
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert line.startswith(f"{tmp_path / 'c.yaml'} is empty: every key takes its default (")
    assert "the built-in toy corpus" in line and "write {} in it" in line
    caplog.clear()
    load_config(write(tmp_path, text), ["train.max_steps=5"])
    assert "every key not given with --set takes its default" in caplog.records[0].getMessage()
    caplog.clear()
    assert load_config(write(tmp_path, "{}\n")) == load_config(None) and not caplog.records

"""The configuration reference: docs/configuration.md agrees with the schema, and says what the
schema says (types, defaults, bounds, choices, descriptions), each section model once."""

import difflib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field

import tfm
from tfm.config import Config, DecodingConfig, ModelConfig, TrainConfig
from tfm.config.reference import COMMAND, config_keys, render, sections

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def staleness(generated: str, committed: str) -> str:
    """'' when the two agree; otherwise what to run, and the first lines of the difference."""
    if generated == committed:
        return ""
    diff = difflib.unified_diff(
        committed.splitlines(), generated.splitlines(), "committed", "schema", lineterm="", n=0
    )
    shown = "\n".join(list(diff)[:30])
    return (
        f"docs/configuration.md disagrees with the schema; regenerate it with\n  {COMMAND}\n{shown}"
    )


def test_committed_reference_matches_the_schema():
    if problem := staleness(render(), REFERENCE.read_text(encoding="utf-8")):
        pytest.fail(problem, pytrace=False)


_MINUTES = TrainConfig.model_fields["max_minutes"].description


class _LongerTraining(TrainConfig):
    max_minutes: float | None = Field(600.0, gt=0, description=_MINUTES)


class _StricterTraining(TrainConfig):
    max_minutes: float | None = Field(None, ge=10, description=_MINUTES)


class _LongerConfig(Config):
    train: _LongerTraining = Field(default_factory=_LongerTraining, description="Training.")


class _StricterConfig(Config):
    train: _StricterTraining = Field(default_factory=_StricterTraining, description="Training.")


@pytest.mark.parametrize(
    ("schema", "row"),
    [
        (_LongerConfig, "| `train.max_minutes` | float or null | `600.0` | > 0 |"),
        (_StricterConfig, "| `train.max_minutes` | float or null | `null` | ≥ 10 |"),
    ],
)
def test_a_changed_field_makes_the_reference_stale(schema, row):
    problem = staleness(render(schema), render())
    assert COMMAND in problem
    changed = [line for line in problem.splitlines() if line.startswith("+|")]
    assert len(changed) == 1 and changed[0].startswith("+" + row), problem


def test_command_prints_the_reference():
    env = {**os.environ, "PYTHONPATH": str(Path(tfm.__file__).parents[1])}
    result = subprocess.run(
        [sys.executable, "-m", "tfm.config.reference"], capture_output=True, env=env, check=True
    )
    assert result.stdout.decode("utf-8") == render()


def test_keys_carry_type_default_bounds_and_choices_of_the_schema():
    keys = {key.path: key for key in config_keys()}
    steps = keys["train.max_steps"]
    assert (steps.type, steps.default, steps.bounds, steps.choices) == (
        "int or null",
        "null",
        "≥ 1",
        (),
    )
    assert steps.description == TrainConfig.model_fields["max_steps"].description
    assert keys["model.dropout"].bounds == "≥ 0.0 and < 1.0"
    assert keys["data.toy.n_train"].bounds == "≥ 1 and ≤ 1000000"
    assert keys["train.max_minutes"].bounds == "> 0"
    assert keys["model.activation"].choices == ("relu", "gelu")
    assert (keys["train.betas"].type, keys["train.betas"].default) == (
        "tuple[float, float]",
        "[0.9, 0.98]",
    )
    assert (keys["train.eps"].default, keys["tokenizer.joint"].default) == ("1e-09", "true")
    assert (keys["data.train"].type, keys["data.train"].default) == (
        "section or list of sections",
        "{format: toy}",
    )
    assert keys["data.<split>.format"].default == ""  # required
    row = (
        "| `data.<split>.format` | str | required | `toy`, `text`, `tsv`, `jsonl`, `hub`, `disk`, "
        "`held_out` |"
    )
    assert row in render()


def test_each_section_model_is_documented_once_and_every_key_once():
    found = sections()
    assert [s.prefix for s in found] == [
        "",
        "data",
        "data.<split>",
        "data.toy",
        "data.monolingual[i]",
        "data.related[i]",
        "tokenizer",
        "model",
        "train",
        "decoding",
    ]
    assert found[2].paths == ("data.train", "data.validation", "data.test",
                              "data.related[i].validation")  # fmt: skip
    text = render()
    assert "`<split>` is one of `train`, `validation`, `test` (`data.related[i].validation` " in (
        text
    )
    for key in config_keys():
        assert text.count(f"| `{key.path}` |") == 1, key.path
    assert "`data.train.format`" not in text
    assert len(config_keys()) == sum(len(s.model.model_fields) for s in found)


def test_every_field_has_a_description_and_every_section_a_docstring():
    undescribed = {key.path for key in config_keys() if not key.description}
    assert not undescribed, sorted(undescribed)
    undocumented = [s.model.__name__ for s in sections() if not s.model.__dict__.get("__doc__")]
    assert not undocumented


def test_a_constraint_the_reference_cannot_show_is_an_error():
    class EvenBeams(DecodingConfig):
        beam_size: int = Field(2, ge=1, multiple_of=2, description="Beam width.")

    class EvenConfig(Config):
        decoding: EvenBeams = Field(default_factory=EvenBeams, description="Decoding.")

    with pytest.raises(ValueError, match=r"decoding\.beam_size: .*MultipleOf"):
        render(EvenConfig)


def test_descriptions_are_those_of_the_fields():
    keys = {key.path: key for key in config_keys()}
    for name, field in ModelConfig.model_fields.items():
        assert keys[f"model.{name}"].description == (field.description or "")

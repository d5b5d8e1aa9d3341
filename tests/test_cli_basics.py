"""What every command line tool owes its users: --version, -h as --help on every command, and
option mistakes reported as the user typed them. No model needed."""

import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tfm
from tfm.cli import app

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_version_prints_the_packages_version():
    result = invoke("--version")
    assert (result.exit_code, result.stdout) == (0, f"tfm {tfm.__version__}\n")
    with PYPROJECT.open("rb") as file:
        assert tomllib.load(file)["project"]["version"] == tfm.__version__


@pytest.mark.parametrize("command", [[], ["translate"], ["eval"], ["data"], ["data", "check"]])
def test_dash_h_is_help_everywhere(command):
    short, long = invoke(*command, "-h"), invoke(*command, "--help")
    assert short.exit_code == long.exit_code == 0, short.output
    assert short.stdout == long.stdout and "Usage:" in short.stdout


@pytest.mark.parametrize(
    "command",
    [["translate", "a sentence"], ["eval"], ["train", "--config", "unread.yaml"]],
)
def test_an_unknown_device_is_named_as_typed(command):
    result = invoke(*command, "--device", "gpu")
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr == "tfm: error: --device gpu: expected auto, cpu, cuda or mps\n"

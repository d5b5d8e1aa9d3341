"""What every command line tool owes its users: --version, -h as --help on every command, and
option mistakes reported as the user typed them. No model needed."""

import tomllib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import tfm
from tfm.cli import _Group, app

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


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["translate", "--n-best", "0", "a"],
         "Invalid value for '--n-best': Input should be greater than or equal to 1 "
         "(see tfm translate -h)"),
        (["serve", "--port", "99999"],
         "Invalid value for '--port': Input should be less than or equal to 65535 "
         "(see tfm serve -h)"),
        (["data", "check", "--jsn"],
         "No such option: --jsn (Possible options: --json, --set) (see tfm data check -h)"),
        (["average", "--last", "2"], "Missing option '--out'. (see tfm average -h)"),
    ],
)  # fmt: skip
def test_a_mistake_the_parser_finds_is_one_line_too(command, message):
    """As every error tfm finds itself: one line on stderr, exit 2, not a framed usage text."""
    result = CliRunner().invoke(app, command, prog_name="tfm")
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr == f"tfm: error: {message}\n"


@pytest.mark.parametrize(
    ("raised", "line", "code"),
    [
        (typer.Abort, "tfm: error: aborted", 1),
        # click's plain ClickException (typer vendors click: found by name, as tfm finds it)
        (lambda: next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")(
            "the parser's own failure"), "tfm: error: the parser's own failure", 1),
    ],
)  # fmt: skip
def test_the_parsers_other_errors_are_one_line_with_their_codes_and_bugs_are_not_hidden(
    raised, line, code, capsys
):
    tool = typer.Typer(cls=_Group, add_completion=False)

    @tool.command()
    def fails() -> None:
        raise raised()

    @tool.command()
    def bug() -> None:
        raise ValueError("a bug")

    group = typer.main.get_command(tool)
    with pytest.raises(SystemExit) as exited:
        group.main(["fails"], prog_name="tfm")
    assert exited.value.code == code and capsys.readouterr().err == line + "\n"
    with pytest.raises(ValueError, match="a bug"):  # not a mistake of the user's: a traceback
        group.main(["bug"], prog_name="tfm")


def test_help_and_a_command_without_arguments_still_show_the_help():
    for command, code in (([], 2), (["data"], 2), (["-h"], 0), (["data", "-h"], 0)):
        result = CliRunner().invoke(app, command, prog_name="tfm")
        assert result.exit_code == code and "Usage: tfm" in result.stdout, command
        assert result.stderr == "", command


@pytest.mark.parametrize("command", [["translate", "a sentence"], ["eval"], ["attention", "a"]])
def test_no_run_yet_is_the_one_line_before_anything_else(command, tmp_path, monkeypatch):
    """Where nothing was trained, the run is looked for first: no device line comes before the
    error that says to train one."""
    monkeypatch.chdir(tmp_path)
    result = invoke(*command)
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr == (
        "tfm: error: no run given and none trained from this directory yet; run `tfm train "
        "--config CONFIG` first or pass --run DIR\n"
    )


def commands(group=None, path=()):
    """(command path, its click command) for every command of `tfm`, subcommands included."""
    import typer.main

    group = group or typer.main.get_command(app)
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def first_paragraph(command) -> str:
    """The first paragraph of a command's help, on one line, as Markdown shows it (`code` as
    code, without its backticks)."""
    return " ".join((command.help or "").split("\n\n")[0].split()).replace("`", "")


def test_help_texts_wrap_as_paragraphs_at_any_width():
    """A docstring's line breaks are not the help's: on a wide terminal each command's first
    paragraph is one line, in `tfm --help`'s list and in its own help; on a narrow one it wraps
    to the width, its words in order."""
    found = list(commands())
    assert len(found) > 10
    wide = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "400"}).stdout
    for path, command in found:
        text = first_paragraph(command)
        if len(path) == 1:
            assert any(line.strip(" │").endswith(text) for line in wide.splitlines()), path
        own = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "400"}).stdout
        assert text in [line.strip() for line in own.splitlines()], path
        narrow = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "50"}).stdout
        assert max(len(line) for line in narrow.splitlines()) <= 50
        head = narrow.split("╭")[0]  # the usage and the command's help, above the panels
        assert text in " ".join(head.split()), path

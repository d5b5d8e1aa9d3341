"""Helpers of the bench scripts' quick tests: reading figures out of a printed report, and
running a script's `tfm` commands in the test's own process."""

import re
import threading

from typer.testing import CliRunner

from tfm.cli import app


def numbers(pattern: str, text: str) -> list[float]:
    """The groups of `pattern`'s first match in `text`, as numbers (fails when it is missing)."""
    found = re.search(pattern, text)
    assert found, f"no line matches {pattern!r} in:\n{text}"
    return [float(group) for group in found.groups()]


_ONE_AT_A_TIME = threading.Lock()  # CliRunner swaps the process's sys.stdout and sys.stderr


def print_in_turn(*args, **kwargs) -> None:
    """`print`, never while a `tfm_in_process` command holds sys.stdout (a script's report line
    written as another thread's command runs)."""
    with _ONE_AT_A_TIME:
        print(*args, **kwargs)


def tfm_in_process(*args: str, strip: bool = True, **_ignored) -> str:
    """What a script's `tfm(*args)` returns (stdout, stripped unless `strip` is False), run in
    this process, one command at a time when a script runs jobs in threads; fails on a non-zero
    exit with the command's output. Other keyword arguments (a script's log file) are ignored:
    the output is in the failure message."""
    with _ONE_AT_A_TIME:
        result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout.strip() if strip else result.stdout

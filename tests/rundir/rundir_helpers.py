"""Helpers shared by the run-directory tests."""

from pathlib import Path


def assert_one_line_naming(error: BaseException, path: Path) -> str:
    message = str(error)
    assert str(path) in message and "\n" not in message, message
    return message

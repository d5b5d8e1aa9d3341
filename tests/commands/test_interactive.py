"""`tfm translate` at a terminal with nothing to read opens a prompt: one line in, its
translation out, earlier lines recalled with the arrow keys, Ctrl-D to leave (exit 0); and
`--file -` reads stdin."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

from typer.testing import CliRunner

from tfm.cli import app
from tfm.commands.input import typed_lines

SENTENCES = ["the small dog sees the big cat", "a bird sleeps"]
UP = "\x1b[A"  # the terminal's up-arrow key
CTRL_D = "\x04"
WAIT_S = 60


def translated(run, *sentences: str) -> list[str]:
    result = CliRunner().invoke(app, ["translate", "--run", str(run), *sentences])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


class Terminal:
    """A program run on a pseudo-terminal: what it wrote so far, and keys typed into it."""

    def __init__(self, command: list[str]) -> None:
        self.master, slave = pty.openpty()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TERM": "xterm"}
        self.process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave,
                                        env=env, close_fds=True)  # fmt: skip
        os.close(slave)
        self.screen = ""

    def wait_for(self, text: str, count: int = 1) -> None:
        deadline = time.monotonic() + WAIT_S
        while self.screen.count(text) < count:
            assert time.monotonic() < deadline, f"{text!r} not shown; the screen:\n{self.screen}"
            if select.select([self.master], [], [], 0.1)[0]:
                try:
                    self.screen += os.read(self.master, 4096).decode("utf-8", "replace")
                except OSError:  # the program ended and closed the terminal
                    break

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode("utf-8"))


def test_translate_at_a_terminal_prompts_recalls_lines_and_ends_on_ctrl_d(trained_run):
    first, second = translated(trained_run, *SENTENCES)
    command = [sys.executable, "-m", "tfm", "translate", "--run", str(trained_run)]
    terminal = Terminal(command)
    try:
        terminal.wait_for("> ")
        terminal.type(SENTENCES[0] + "\r")
        terminal.wait_for(first)
        terminal.wait_for("> ", 2)
        terminal.type(SENTENCES[1] + "\r")
        terminal.wait_for(second)
        terminal.wait_for("> ", 3)
        terminal.type(UP + UP + "\r")  # two lines back: the first sentence again
        terminal.wait_for(first, 2)  # translated again
        terminal.wait_for("> ", 4)
        terminal.type(CTRL_D)
        assert terminal.process.wait(WAIT_S) == 0
    finally:
        terminal.process.kill()
        os.close(terminal.master)
    assert "Ctrl-D ends" in terminal.screen
    assert "Traceback" not in terminal.screen


def test_typed_lines_are_batches_of_one_until_the_input_ends():
    typed = iter(["one", "  ", "two"])

    def ask(prompt: str) -> str:
        assert prompt == "> "
        line = next(typed, None)
        if line is None:
            raise EOFError
        return line

    assert list(typed_lines(ask)) == [["one"], ["two"]]


def test_file_dash_reads_stdin(trained_run):
    result = CliRunner().invoke(
        app, ["translate", "--run", str(trained_run), "--file", "-"], input="\n".join(SENTENCES)
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == translated(trained_run, *SENTENCES)

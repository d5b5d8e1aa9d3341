"""`tfm translate` as a Unix filter, through real pipes: each line's translation appears as soon as
the line is in, a reader that leaves early (`| head -1`) ends it quietly, and bad bytes, empty
input and over-long lines get one clear message. The session's trained run translates."""

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tfm.cli import app

SRC = str(Path(__file__).resolve().parents[1] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
SENTENCES = ["the dog sees the cat", "a man walks home", "the small cat sleeps"]
WAIT_S = 60  # for one line's translation: starting python and torch included
PIPES = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def run(trained_run) -> str:
    return str(trained_run)


def invoke(*args: str, input: str | bytes | None = None):
    return CliRunner().invoke(app, list(args), input=input)


def tfm(*args: str | bytes, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tfm", *args], env=ENV, **popen)


class LineReader:
    """The lines a child writes on a pipe, taken one at a time with a time limit."""

    def __init__(self, stream) -> None:
        self.fd = stream.fileno()
        self.buffer = b""

    def next(self) -> str | None:
        """The next line, or None at the end of the output."""
        deadline = time.monotonic() + WAIT_S
        while b"\n" not in self.buffer:
            if not select.select([self.fd], [], [], max(deadline - time.monotonic(), 0))[0]:
                pytest.fail(f"no output line within {WAIT_S} s")
            data = os.read(self.fd, 1 << 16)
            if not data:
                assert self.buffer == b"", self.buffer
                return None
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode("utf-8") + "\n"


def converse(run: str, *options: str, rows_per_line: int = 1) -> list[list[str]]:
    """Send SENTENCES one at a time, each only after the output for the one before it has
    appeared; returns each sentence's output lines."""
    proc = tfm("translate", "--run", run, *options, **PIPES)
    try:
        reader = LineReader(proc.stdout)
        replies = []
        for sentence in SENTENCES:
            proc.stdin.write(sentence.encode() + b"\n")
            proc.stdin.flush()  # the pipe stays open: tfm must answer before end of input
            replies.append([reader.next() for _ in range(rows_per_line)])
        proc.stdin.close()
        assert reader.next() is None  # nothing more once the input ends
        assert proc.wait(timeout=WAIT_S) == 0, proc.stderr.read().decode()
    finally:
        proc.kill()
    return replies


def test_each_line_is_translated_as_it_arrives(run):
    replies = converse(run)
    expected = invoke("translate", "--run", run, *SENTENCES).stdout
    assert "".join(line for reply in replies for line in reply) == expected


def test_n_best_rows_of_each_line_arrive_with_it(run):
    replies = converse(run, "--n-best", "2", "--beam-size", "2", rows_per_line=2)
    expected = invoke("translate", "--run", run, "--n-best", "2", "--beam-size", "2", *SENTENCES)
    assert "".join(line for reply in replies for line in reply) == expected.stdout
    assert [[row.split("\t")[0] for row in reply] for reply in replies] == [["1", "1"], ["2", "2"],
                                                                           ["3", "3"]]  # fmt: skip


def test_a_reader_that_leaves_early_ends_it_quietly(run):
    proc = tfm("translate", "--run", run, "--device", "cpu", **PIPES)
    try:
        reader = LineReader(proc.stdout)
        proc.stdin.write(b"the dog sees the cat\n")
        proc.stdin.flush()
        assert reader.next() is not None
        proc.stdout.close()  # as `head -1` does after its line
        proc.stdin.write(b"a man walks home\n" * 50)
        proc.stdin.close()
        assert proc.wait(timeout=WAIT_S) == 0
        assert proc.stderr.read().decode() == ""  # not a word: no error, no traceback
    finally:
        proc.kill()


def test_head_in_a_shell_pipeline_sees_exit_status_zero(run, tmp_path):
    script = (
        'for i in $(seq 3000); do echo "the dog sees the cat $i"; done'
        f' | {sys.executable} -m tfm translate --run "$RUN" 2>"$ERR" | head -1 >/dev/null;'
        ' echo "${PIPESTATUS[1]}"'
    )
    err = tmp_path / "stderr.txt"
    done = subprocess.run(["bash", "-c", script], env={**ENV, "RUN": run, "ERR": str(err)},
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.stdout.strip() == "0", done.stderr
    assert "Error" not in err.read_text() and "Traceback" not in err.read_text()


def test_invalid_utf8_on_stdin_names_the_line_after_the_lines_before_it(run):
    result = invoke("translate", "--run", run, input=b"the dog sees the cat\ncaf\xe9 au lait\nok\n")
    assert result.exit_code == 2
    assert result.stdout == invoke("translate", "--run", run, "the dog sees the cat").stdout
    assert result.stderr.splitlines()[-1] == (
        "tfm: error: stdin:2: not valid UTF-8 (byte 4 of the line: b'\\xe9 au'); "
        "expected UTF-8 text"
    )
    assert "Traceback" not in result.stderr


def test_invalid_utf8_in_an_argument_names_the_argument(run):
    proc = tfm(b"translate", b"--run", run.encode(), b"the dog", b"caf\xe9", **PIPES)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out) == (2, b"")
    assert err.decode() == "tfm: error: argument 2: not valid UTF-8 (byte 4: b'\\xe9')\n"


def test_empty_input_gives_no_output(run):
    for args in ([], ["--n-best", "2"]):
        result = invoke("translate", "--run", run, *args, input="")
        assert (result.exit_code, result.stdout) == (0, ""), result.output


def test_the_warning_about_over_long_lines_names_them(run):
    long = " ".join(["the dog sees the small cat"] * 60)  # 300 words: beyond 256 positions
    lines = ["the cat", long, "a man", long, ""]
    result = invoke("translate", "--run", run, input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.split("\n")) == len(lines) + 1
    assert "line(s) 2, 4: longer than 256 tokens, cut to fit the model" in result.stderr
    beam = invoke("translate", "--run", run, "--beam-size", "2", "a man", long)  # beam search
    assert "line(s) 2: longer than 256 tokens" in beam.stderr


def test_a_file_is_translated_in_batches_and_its_lines_named_across_them(
    run, tmp_path, monkeypatch
):
    from tfm.commands import input as translation_input
    from tfm.prediction.translator import Translator

    long = " ".join(["the dog sees the small cat"] * 60)
    lines = [*SENTENCES, "a man walks home", long]  # the long one is line 5, in the third batch
    path = tmp_path / "in.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    alone = [invoke("translate", "--run", run, s).stdout.strip() for s in lines[:4]]
    monkeypatch.setattr(translation_input, "BATCH_LINES", 2)
    batches, translate = [], Translator.translate

    def recorded(self, texts, *, first_line=1, settings=None):
        batches.append((first_line, len(texts)))
        return translate(self, texts, first_line=first_line, settings=settings)

    monkeypatch.setattr(Translator, "translate", recorded)
    result = invoke("translate", "--run", run, "--file", str(path))
    assert result.exit_code == 0, result.output
    assert batches == [(1, 2), (3, 2), (5, 1)]
    assert result.stdout.splitlines()[:4] == alone and len(result.stdout.splitlines()) == 5
    assert "line(s) 5: longer than 256 tokens, cut to fit the model" in result.stderr

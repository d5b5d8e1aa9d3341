"""Nothing logged is lost: training goes on when stderr goes away (a closed pipe, a closed
terminal), every line it logs is also in run_dir/train.log, and each validation's hypotheses are
kept beside their sources and references (validations/step-N.tsv)."""

import csv
import logging
import re
import threading
import time

from attack_helpers import invoke, start_tfm
from builders import tiny_config_file

from tfm.training.run_log import RunLogHandler

TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")


def log_lines(run) -> list[str]:
    """train.log's lines without their time stamps (a multi-line message keeps its lines)."""
    return [TIME.sub("", line) for line in (run / "train.log").read_text().splitlines()]


def test_training_goes_on_when_its_stderr_pipe_is_closed(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=20, validate_every=10)
    process = start_tfm("train", "--config", config)
    seen = [process.stderr.readline().rstrip("\n") for _ in range(3)]
    process.stderr.close()  # the reader goes away, as `| head -3` does
    stdout, _ = process.communicate(timeout=300)

    assert process.returncode == 0
    run = tmp_path / "run"
    assert stdout == f"{run}\n"
    assert (run / "best.pt").is_file() and (run / "last.pt").is_file()
    lines = log_lines(run)
    assert lines[:3] == seen
    assert any(line.startswith("step 20 validation: ") for line in lines)
    done = next(i for i, line in enumerate(lines) if line.startswith("done: 20 steps (max_steps)"))
    assert lines[-1].startswith("confidence map fitted on 6 validation sentences")  # then this
    assert done >= len(lines) - 4  # then the map: its device, its validation split, the line


def test_train_log_holds_every_line_of_stderr_and_validations_keep_hypotheses(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=4, validate_every=2, validation_samples=2)
    result = invoke("train", "--config", config, "--no-progress")
    assert result.exit_code == 0, result.stderr
    run = tmp_path / "run"
    assert log_lines(run) == result.stderr.splitlines()
    assert "  hyp: " in result.stderr  # the sample translations are among them

    for step in (2, 4):
        with open(run / "validations" / f"step-{step:08d}.tsv", newline="") as file:
            rows = list(csv.reader(file, delimiter="\t"))
        assert rows[0] == ["source", "reference", "hypothesis"]
        assert len(rows) == 1 + 6  # every validation pair of the tiny config
        sample = result.stderr.split(f"step {step} validation: ")[1]
        assert f"  src: {rows[1][0]}\n  ref: {rows[1][1]}\n  hyp: {rows[1][2]}\n" in sample

    again = invoke("train", "--config", config, "--no-progress", "--resume",
                   "--set", "train.max_steps=6")  # fmt: skip
    assert again.exit_code == 0, again.stderr
    assert log_lines(run) == result.stderr.splitlines() + again.stderr.splitlines()


def test_an_error_that_ends_training_is_in_train_log(tmp_path):
    config = tiny_config_file(tmp_path, max_steps=2, validate_every=2, lr=1e39)
    result = invoke("train", "--config", config, "--no-progress")
    assert result.exit_code == 1
    assert log_lines(tmp_path / "run")[-1].startswith("error: ")


def test_a_line_another_thread_is_writing_when_the_log_closes_is_kept(tmp_path):
    """A signal's warning is logged from a thread of its own (tfm.commands.train), which may
    still be writing when the run ends and its log closes: the close waits for the line."""
    holding, written = threading.Event(), []
    handler = RunLogHandler()
    handler.open(tmp_path / "train.log")

    def write_late() -> None:
        handler.acquire()  # as logging does around each record
        try:
            holding.set()
            time.sleep(0.2)
            handler.emit(logging.makeLogRecord({"msg": "tfm: SIGINT received"}))
            written.append(True)
        finally:
            handler.release()

    thread = threading.Thread(target=write_late)
    thread.start()
    holding.wait(timeout=10)
    handler.close()
    thread.join(timeout=10)
    assert written and handler.file is None
    assert log_lines(tmp_path) == ["tfm: SIGINT received"]

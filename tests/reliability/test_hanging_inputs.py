"""Inputs that made tfm hang: a line without spaces long enough to make BPE take minutes is
dropped (and said so) before BPE, and SIGINT/SIGTERM stop data preparation and tokenizer training
within a moment (the Rust trainer never returns to Python on its own)."""

import random
import signal
import time

import pytest
from attack_helpers import invoke, start_tfm
from builders import tiny_config_file

from tfm.limits import MAX_LINE_CHARS


def write_text_corpus(folder, name: str, pairs: list[tuple[str, str]]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for lang, side in (("de", 0), ("en", 1)):
        text = "".join(pair[side] + "\n" for pair in pairs)
        (folder / f"{name}.{lang}").write_text(text, encoding="utf-8")
    return str(folder / name)


def corpus_config(tmp_path, train: list[tuple[str, str]], **overrides):
    data = tmp_path / "data"
    valid = [("ein Hund", "a dog"), ("eine Katze", "a cat")]
    return tiny_config_file(
        tmp_path,
        data={
            "src_lang": "de",
            "tgt_lang": "en",
            "train": {"format": "text", "path": write_text_corpus(data, "train", train)},
            "validation": {"format": "text", "path": write_text_corpus(data, "valid", valid)},
        },
        **overrides,
    )


def test_a_line_longer_than_the_limit_is_dropped_and_reported_before_bpe(tmp_path):
    pairs = [(f"der Hund {i}", f"the dog {i}") for i in range(40)]
    pairs[2] = ("x" * 200_000, "one long line")  # BPE alone took 11 s over such a word
    pairs[6] = ("ein Satz", "y" * (MAX_LINE_CHARS + 1))
    config = corpus_config(tmp_path, pairs, **{"tokenizer.vocab_size": 100})
    started = time.monotonic()
    result = invoke("data", "prepare", "--config", config)
    assert result.exit_code == 0, result.stderr
    assert time.monotonic() - started < 5
    warning = "train: dropped 2 pair(s) with a side longer than 10,000 characters (line 3, 7)"
    learning = "learning BPE from the 38 training pairs"
    assert result.stderr.index(warning) < result.stderr.index(learning)
    assert "kept 38, dropped 2 (side over 10,000 characters: 2 at lines 3, 7)" in result.stderr


@pytest.fixture
def slow_bpe_config(tmp_path):
    """A corpus whose BPE takes about 20 s: 200 words of 9,999 characters (under the limit)."""
    rng = random.Random(0)
    words = ["".join(rng.choices("abcdefghij", k=MAX_LINE_CHARS - 1)) for _ in range(200)]
    return corpus_config(tmp_path, [(w, w[::-1]) for w in words],
                         **{"tokenizer.vocab_size": 5000})  # fmt: skip


def wait_for(process, text: str) -> str:
    """The child's stderr up to the line holding `text`."""
    lines = []
    while text not in (line := process.stderr.readline()):
        assert line, "".join(lines)  # the process ended first
        lines.append(line)
    return "".join(lines)


@pytest.mark.parametrize(
    ("command", "sent", "code"),
    [(["train"], signal.SIGTERM, 130), (["data", "prepare"], signal.SIGINT, 130)],
    ids=["train SIGTERM", "prepare SIGINT"],
)
def test_a_signal_stops_tokenizer_training_at_once(tmp_path, slow_bpe_config, command, sent, code):
    # Started with SIGINT ignored (a shell's background job): a signal sent on purpose still stops.
    process = start_tfm(*command, "--config", slow_bpe_config, sigint_ignored=True)
    wait_for(process, "learning BPE from the 200 training pairs")
    time.sleep(0.5)  # inside the Rust trainer
    process.send_signal(sent)
    started = time.monotonic()
    before = wait_for(process, "tfm: interrupted")  # stopped; the interpreter's exit follows
    assert time.monotonic() - started < 2
    _, stderr = process.communicate(timeout=60)
    # nothing after the line but the end of a progress bar's line: no traceback, no message
    assert process.returncode == code and stderr.strip() == ""
    if command == ["train"]:
        assert "tfm: SIGTERM received before training began: stopping now" in before
    assert not (tmp_path / "run").exists()
    assert not list((tmp_path / ".tfm-cache").glob("*/meta.json"))  # nothing half-prepared
    assert not list((tmp_path / ".tfm-cache").glob(".tmp-*"))

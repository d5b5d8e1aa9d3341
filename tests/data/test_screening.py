"""Text that should not be trained on is reported where it is: control and replacement characters
(count per character, first file:line, or refused), and each split's dropped pairs once, with the
first lines they came from."""

import logging

import pytest

from tfm.config import load_config
from tfm.data.corpus import LoadReport
from tfm.data.pipeline import prepare_splits
from tfm.data.screening import first_lines
from tfm.errors import DataError


def tsv_config(tmp_path, lines: list[str], *sets: str):
    path = tmp_path / "train.tsv"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    split = f"{{format: tsv, path: {path}, columns: [en, de]}}"
    sets = (f"data.train={split}", f"data.validation={split}", "tokenizer.vocab_size=100", *sets)
    config = load_config(None, list(sets))
    return config, path


GOOD = [f"the dog {i}\tder Hund {i}" for i in range(8)]


def test_nul_and_replacement_characters_warn_with_counts_and_the_first_line(tmp_path, caplog):
    lines = [*GOOD]
    lines[2] = "the\x00dog\tder Hund"
    lines[5] = "a cat\x00\x00\tdie Katze \ufffd"
    config, path = tsv_config(tmp_path, lines)
    caplog.set_level(logging.INFO, logger="tfm")
    splits, _ = prepare_splits(config.data, config.tokenizer, ["train"], tokenizer=None)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "data.train: 2 pair(s) hold control or replacement characters (3 × U+0000 NUL, "
        f"1 × U+FFFD REPLACEMENT CHARACTER), first at {path}:3: U+0000 NUL;"
    )
    assert "data.control_chars: refuse" in warnings[0]
    assert len(splits["train"]) == 8  # kept: warning only


def test_refuse_stops_at_the_first_line_with_the_side_file_of_text_format(tmp_path):
    (tmp_path / "c.en").write_text("a\ttab is fine\nbell\x07 here\n", encoding="utf-8")
    (tmp_path / "c.de").write_text("gut\nKlingel\n", encoding="utf-8")
    split = f"{{format: text, path: {tmp_path / 'c'}}}"
    sets = [f"data.train={split}", "data.control_chars=refuse"]
    config = load_config(None, sets)
    with pytest.raises(DataError) as error:
        prepare_splits(config.data, config.tokenizer, ["train"], tokenizer=None)
    assert str(error.value) == (
        f"{tmp_path / 'c'}.en:2: U+0007 BEL in the text (data.control_chars is refuse; clean the "
        "data of data.train)"
    )


def test_dropped_pairs_are_reported_once_per_split_with_their_first_lines(tmp_path, caplog):
    lines = [*GOOD]
    lines[1] = "\tder Hund"  # empty source: line 2
    lines[4] = " ".join(["dog"] * 300) + "\tHund"  # over data.max_length: line 5
    lines[6] = " ".join(["cat"] * 200) + "\tKatze"  # line 7
    config, _ = tsv_config(tmp_path, lines, "data.max_length=50")
    caplog.set_level(logging.INFO, logger="tfm")
    prepare_splits(config.data, config.tokenizer, ["train", "validation"], tokenizer=None)
    reports = [r.getMessage() for r in caplog.records if ": read " in r.getMessage()]
    assert [r.split(":")[0] for r in reports] == ["train", "validation"]
    assert reports[0].endswith(
        "read 8 pairs from " + str(tmp_path / "train.tsv") + ", kept 5, dropped 3 "
        "(empty side: 1 at line 2, too long: 2 at lines 5, 7)"
    )
    assert reports[1].endswith("kept 7, dropped 1 (empty side: 1 at line 2)")  # none too long


def test_first_lines_skip_the_pairs_dropped_before():
    # 10 pairs read, those at 1, 2 and 6 dropped first; the 7 left are 0, 3, 4, 5, 7, 8, 9.
    assert first_lines([0, 1, 3, 4], [1, 2, 6], "line") == [1, 4, 6]  # the first SHOWN
    assert first_lines([6], [1, 2, 6], "line") == [10]
    assert first_lines([0], [0], "row") == [1]  # rows count from 0
    report = LoadReport(split="test", origin="hub", read=4, kept=4, unit="row")
    report.drop("empty", 1, at=[0])
    report.skipped = [0]
    report.drop("too long", 1, at=[0])
    assert report.summary().endswith("dropped 2 (empty side: 1 at row 0, too long: 1 at row 1)")


def test_training_through_the_data_cache_reports_the_same_on_every_run(tmp_path, caplog):
    from tfm.data.cache.prepared_cache import training_splits

    lines = [*GOOD]
    lines[2] = "the\x00dog\tder Hund"
    lines[4] = " ".join(["dog"] * 300) + "\tHund"  # over data.max_length: line 5
    sets = [f"run_dir={tmp_path / 'run'}", "data.max_length=50", f"data.cache_dir={tmp_path}/c"]
    config, path = tsv_config(tmp_path, lines, *sets)
    caplog.set_level(logging.INFO, logger="tfm")
    for _ in range(2):  # prepares the cache, then maps it
        caplog.clear()
        splits, _, _ = training_splits(config)
        assert len(splits["train"]) == 7
        messages = [r.getMessage() for r in caplog.records]
        warnings = [m for m in messages if m.startswith("data.train: 1 pair(s) hold control")]
        assert len(warnings) == 1 and f"first at {path}:3: U+0000 NUL" in warnings[0]
        reports = [m for m in messages if m.startswith("train: read")]
        assert len(reports) == 1 and "dropped 1 (too long: 1 at line 5)" in reports[0]
    refusing = config.model_copy(update={"data": config.data.model_copy(
        update={"control_chars": "refuse"})})  # fmt: skip
    with pytest.raises(DataError, match=rf"{path}:3: U\+0000 NUL in the text"):
        training_splits(refusing)  # the prepared entry remembers what it held

"""`tfm data check`: counts, lengths, outliers, duplicates and train overlap of a small corpus
built to contain one of each."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from tfm.cli import app
from tfm.config import load_config
from tfm.data.check import (
    _repeats,
    _shared,
    check_data,
    format_table,
    length_stats,
)
from tfm.data.corpus_figures import ratio_outliers

TRAIN = [
    ("the dog sees the cat .", "der Hund sieht die Katze ."),
    ("a man walks home .", "ein Mann geht nach Hause ."),
    ("the small cat sleeps .", "die kleine Katze schläft ."),
    ("the dog sees the cat .", "der Hund sieht die Katze ."),  # duplicate of the first
    ("yes", "ja , der Mann sieht den großen Hund nicht ."),  # 1 word against 10: an outlier
    ("a woman reads .", "eine Frau liest ."),
]
VALIDATION = [
    ("a man walks home .", "ein Mann geht nach Hause ."),  # also in train
    ("the woman sees a dog .", "die Frau sieht einen Hund ."),
    ("the price is 5 € .", "der Preis ist 5 € ."),  # € is not in train: <unk>
]
TEST = [("the cat reads .", "die Katze liest ."), ("a dog sleeps .", "ein Hund schläft .")]


@pytest.fixture
def config_path(tmp_path):
    lines = [f"run_dir: {tmp_path / 'run'}", "data:"]  # the data cache goes beside the run
    for split, pairs in (("train", TRAIN), ("validation", VALIDATION), ("test", TEST)):
        path = tmp_path / f"{split}.tsv"
        path.write_text("".join(f"{en}\t{de}\n" for en, de in pairs), encoding="utf-8")
        lines.append(f"  {split}: {{format: tsv, path: {path}, columns: [en, de]}}")
    lines.append("tokenizer: {vocab_size: 120, min_frequency: 1}")
    path = tmp_path / "config.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_report_counts_each_planted_problem(config_path):
    report = check_data(load_config(config_path))
    train, validation, test = (report["splits"][s] for s in ("train", "validation", "test"))
    assert [train["pairs"], validation["pairs"], test["pairs"]] == [6, 3, 2]
    assert train["duplicate_pairs"] == 1 and validation["duplicate_pairs"] == 0
    assert train["length_ratio_outliers"] == 1 and train["words_ratio_median"] == 1.0
    assert train["length_ratio_examples"] == [list(TRAIN[4])]
    assert (validation["src_in_train"], validation["pairs_in_train"]) == (1, 1)
    assert (test["src_in_train"], test["pairs_in_train"]) == (0, 0)
    assert "src_in_train" not in train
    assert train["src_unk_rate"] == 0 and validation["src_unk_rate"] > 0
    assert train["src_words"] == {"mean": 4.5, "median": 5, "p95": 6, "max": 6}
    assert train["src_tokens_per_word"] >= 1.0
    notes = "\n".join(report["notes"])
    assert (
        "train: 1 (16.7%) of pairs are more than 3 times off the median ratio of source to "
        "target words (1.00), e.g. 'yes' -> " in notes
    )
    assert "train: 1 (16.7%) of pairs repeat an earlier one" in notes
    assert "validation: 1 (33.3%) of sources also occur in train (1 identical pairs)" in notes
    assert "validation: " in notes and "of src tokens are <unk>" in notes
    assert "test:" not in notes


def test_a_pair_is_an_outlier_by_its_distance_from_the_usual_ratio():
    src, tgt = np.array([9, 9, 9, 9, 2, 0, 9]), np.array([19, 19, 19, 19, 19, 0, 3])
    outliers, median = ratio_outliers(src, tgt, 3.0)
    assert median == 0.5  # (9 + 1) / (19 + 1): twice the target's words is usual here
    # 3/20 is 3.3 times below it, 1/1 twice above, 10/4 five times above
    assert outliers.tolist() == [4, 6]
    assert ratio_outliers(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 3.0)[1] == 1.0


def test_length_helpers():
    assert length_stats([3, 1, 2, 10]) == {"mean": 4.0, "median": 2, "p95": 10, "max": 10}
    assert length_stats([]) == {"mean": 0.0, "median": 0, "p95": 0, "max": 0}


def test_table_has_a_column_per_split_and_the_notes(config_path):
    table = format_table(check_data(load_config(config_path)))
    lines = table.splitlines()
    assert lines[0].split() == ["train", "validation", "test"]
    assert lines[1].split() == ["pairs", "6", "3", "2"]
    assert any(line.startswith("duplicate pairs") for line in lines)
    assert any(line.startswith("sources also in train") and " - " in line for line in lines)
    assert lines[-1].startswith("note: ")


def test_cli_prints_the_table_or_json(config_path):
    runner = CliRunner()
    result = runner.invoke(app, ["data", "check", "--config", str(config_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].split() == ["train", "validation", "test"]
    result = runner.invoke(app, ["data", "check", "--config", str(config_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["splits"]["train"]["duplicate_pairs"] == 1


def test_cli_takes_set_overrides_as_train_does(config_path, tmp_path):
    """The split and the limit checked are those the --set overrides name: here the test file
    as the validation split, and a data.max_length of 8, shorter than the outlier's 10 words."""
    test_tsv = tmp_path / "test.tsv"
    result = CliRunner().invoke(app, [
        "data", "check", "--config", str(config_path), "--json",
        "--set", f"data.validation={{format: tsv, path: {test_tsv}, columns: [en, de]}}",
        "--set", "data.max_length=8",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    splits = json.loads(result.stdout)["splits"]
    assert splits["validation"]["pairs"] == len(TEST) and splits["test"]["pairs"] == len(TEST)
    assert splits["train"]["longer_than_max_length"] >= 1
    plain = check_data(load_config(config_path))["splits"]["train"]
    assert plain["longer_than_max_length"] == 0  # the default max_length: none too long
    result = CliRunner().invoke(app, ["data", "check", "--config", str(config_path),
                                      "--set", "data.max_lenght=8"])  # fmt: skip
    assert result.exit_code == 2 and "max_length" in result.stderr


def test_a_config_without_a_test_split_checks_the_other_two_and_says_so(tmp_path):
    """Training needs no test split: where the config names none beside a validation split,
    the check covers train and validation and a note says why test is missing; the toy corpus
    it would get tests only a model trained on it, whatever the languages."""
    lines = [f"run_dir: {tmp_path / 'run'}", "data:", "  src_lang: en", "  tgt_lang: fr"]
    for split, pairs in (("train", TRAIN), ("validation", VALIDATION)):
        path = tmp_path / f"{split}.tsv"
        path.write_text("".join(f"{en}\t{de}\n" for en, de in pairs), encoding="utf-8")
        lines.append(f"  {split}: {{format: tsv, path: {path}, columns: [en, fr]}}")
    config = tmp_path / "config.yaml"
    config.write_text("\n".join([*lines, "tokenizer: {vocab_size: 120, min_frequency: 1}"]) + "\n")
    result = CliRunner().invoke(app, ["data", "check", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report["splits"]) == ["train", "validation"]
    assert report["splits"]["validation"]["pairs"] == len(VALIDATION)
    note = (
        "test: not checked: the config names no test split (the built-in toy corpus it would "
        "get tests only a model trained on it); give data.test to check one"
    )
    assert report["notes"][-1] == note
    # English–German, the toy's languages: still no test of a model trained on these files
    german = config.read_text().replace("tgt_lang: fr", "tgt_lang: de").replace("fr]", "de]")
    config.write_text(german)
    report = check_data(load_config(config))
    assert list(report["splits"]) == ["train", "validation"] and report["notes"][-1] == note


def test_a_config_naming_only_train_checks_validation_and_test_held_out_of_it(tmp_path):
    """The splits held out of the training corpus are checked as splits: sentences training
    does not read."""
    path = tmp_path / "train.tsv"
    path.write_text("".join(f"{en}\t{fr}\n" for en, fr in TRAIN), encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"run_dir: {tmp_path / 'run'}\ndata: {{src_lang: en, tgt_lang: fr, train: {{format: tsv, "
        f"path: {path}, columns: [en, fr]}}}}\ntokenizer: {{vocab_size: 120, min_frequency: 1}}\n"
    )
    result = CliRunner().invoke(app, ["data", "check", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    splits = json.loads(result.stdout)["splits"]
    assert list(splits) == ["train", "validation", "test"]
    for name in ("validation", "test"):
        stats = splits[name]
        assert stats["pairs"] >= 1 and stats["src_in_train"] == stats["pairs_in_train"] == 0
    held = splits["train"]["dropped"]["held out for validation and test"]
    assert held >= 2 and splits["train"]["pairs"] == len(TRAIN) - held


def test_cli_missing_config_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(app, ["data", "check", "--config", str(tmp_path / "no.yaml")])
    assert result.exit_code == 2
    assert "no.yaml does not exist" in result.stderr


def test_repeats_and_shared_count_as_unique_and_isin_would():
    rng = np.random.default_rng(3)
    hashes = rng.integers(-50, 50, size=400)  # many values three times and more
    train = np.sort(rng.integers(-80, 20, size=300))
    assert _repeats(hashes) == len(hashes) - len(np.unique(hashes)) > 250
    assert _shared(hashes, train) == np.count_nonzero(np.isin(hashes, train)) > 100
    assert _shared(hashes, train[:0]) == 0 and _repeats(hashes[:0]) == 0


JAPANESE = [
    ("I see the dog .", "私は犬を見る。"),
    ("the cat sleeps .", "猫は寝ている。"),
    ("she reads a book every day .", "彼女は毎日本を読む。"),
    ("we walked home together .", "私たちは一緒に家へ歩いた。"),
    ("the train is late again .", "電車はまた遅れている。"),
    ("yes", "いいえ、私は昨日その大きな赤い本を図書館で読みませんでした。"),  # misaligned
]


def test_words_of_a_script_without_spaces_are_its_characters(tmp_path):
    """Split on spaces, every Japanese sentence is one word: each pair looked misaligned and
    each target piece a word's fraction. Counted a character a word, only the planted
    misaligned pair is off the corpus's ratio."""
    lines = [f"run_dir: {tmp_path / 'run'}", "data:", "  src_lang: en", "  tgt_lang: ja"]
    for split in ("train", "validation"):
        path = tmp_path / f"{split}.tsv"
        path.write_text("".join(f"{en}\t{ja}\n" for en, ja in JAPANESE), encoding="utf-8")
        lines.append(f"  {split}: {{format: tsv, path: {path}, columns: [en, ja]}}")
    config = tmp_path / "config.yaml"
    config.write_text("\n".join([*lines, "tokenizer: {vocab_size: 200, min_frequency: 1}"]) + "\n")
    report = check_data(load_config(config))
    train = report["splits"]["train"]
    assert train["tgt_words"]["max"] == len(
        "いいえ、私は昨日その大きな赤い本を図書館で読みませんでした。"
    )
    assert train["tgt_words"]["median"] == len("彼女は毎日本を読む。")
    assert train["length_ratio_outliers"] == 1
    assert train["length_ratio_examples"] == [list(JAPANESE[-1])]
    assert train["tgt_tokens_per_word"] < 1.5
    assert not [note for note in report["notes"] if "tgt tokens per word" in note]

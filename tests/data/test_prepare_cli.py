"""`tfm data prepare`: the training split tokenized into the data cache ahead of training, and
the entry's folder as the one line on stdout."""

import json

from typer.testing import CliRunner

from tfm.cli import app


def test_prepare_prints_the_entry_and_a_second_call_finds_it(tmp_path):
    config = tmp_path / "toy.yaml"
    config.write_text(
        f"run_dir: {tmp_path / 'runs' / 'toy'}\n"
        "data: {toy: {n_train: 300, n_validation: 5, n_test: 5}}\n"
        "tokenizer: {vocab_size: 150}\n",
        encoding="utf-8",
    )
    first = CliRunner().invoke(app, ["data", "prepare", "--config", str(config)])
    assert first.exit_code == 0, first.output
    (line,) = first.stdout.splitlines()
    entry = tmp_path / "runs" / ".tfm-cache" / line.rsplit("/", 1)[-1]
    assert line == str(entry)
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["pairs"] == 300 and (entry / "tokenizer.json").is_file()
    assert "prepared data written to" in first.stderr
    again = CliRunner().invoke(
        app, ["data", "prepare", "--config", str(config), "--set", "data.max_length=20"]
    )
    assert again.exit_code == 0 and again.stdout == first.stdout  # max_length is not in the key
    assert "prepared data in" in again.stderr


def test_prepare_names_a_missing_training_file(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        f"run_dir: {tmp_path / 'run'}\ndata: {{train: {{format: tsv, path: {tmp_path}/no.tsv}}}}\n"
    )
    result = CliRunner().invoke(app, ["data", "prepare", "--config", str(config)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"tfm: error: {tmp_path}/no.tsv: no such file (check data.train.path)"
    )
    assert result.stdout == ""

"""`tfm export`, and `tfm translate` / `tfm eval` given an export as --run: the same output
contracts as the run itself, through the CLI."""

import json

from typer.testing import CliRunner

from tfm.cli import app
from tfm.commands import input as input_lines

runner = CliRunner()
SENTENCES = ["the small dog sees the big cat", "", "a man walks home"]


def test_export_prints_the_folder_and_refuses_to_overwrite_without_asking(toy_run, tmp_path):
    out = tmp_path / "ct2"
    first = runner.invoke(app, ["export", "--run", str(toy_run), "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() == str(out)
    again = runner.invoke(app, ["export", "--run", str(toy_run), "--out", str(out)])
    assert again.exit_code == 2
    assert "--overwrite" in again.output
    bad = runner.invoke(app, ["export", "--run", str(toy_run), "--out", str(tmp_path / "q"),
                              "--quantization", "int4"])  # fmt: skip
    assert bad.exit_code == 2 and "int4" in bad.output


def test_translate_with_an_export_prints_what_the_run_prints(toy_run, exported):
    ours = runner.invoke(app, ["translate", "--run", str(toy_run), *SENTENCES])
    theirs = runner.invoke(app, ["translate", "--run", str(exported), *SENTENCES])
    assert ours.exit_code == 0 and theirs.exit_code == 0, theirs.output
    assert theirs.stdout == ours.stdout
    assert theirs.stdout.splitlines()[1] == ""  # a blank line stays blank


def test_n_best_with_an_export_has_the_runs_format_and_hypotheses(toy_run, exported):
    args = ["translate", "--n-best", "2", "--beam-size", "3", SENTENCES[0]]
    ours = runner.invoke(app, [*args, "--run", str(toy_run)])
    theirs = runner.invoke(app, [*args, "--run", str(exported)])
    assert theirs.exit_code == 0, theirs.output
    ours_rows = [line.split("\t") for line in ours.stdout.splitlines()]
    theirs_rows = [line.split("\t") for line in theirs.stdout.splitlines()]
    assert [(n, text) for n, _, text in theirs_rows] == [(n, text) for n, _, text in ours_rows]
    for (_, ours_score, _), (_, theirs_score, _) in zip(ours_rows, theirs_rows, strict=True):
        assert abs(float(ours_score) - float(theirs_score)) < 1e-3


def test_eval_with_an_export_scores_the_split_as_the_run_does(toy_run, exported):
    ours = json.loads(runner.invoke(app, ["eval", "--run", str(toy_run), "--json"]).stdout)
    result = runner.invoke(app, ["eval", "--run", str(exported), "--json"])
    assert result.exit_code == 0, result.output
    theirs = json.loads(result.stdout)
    assert theirs["engine"] == "ctranslate2" and theirs["loss"] is None
    assert theirs["sentences"] == ours["sentences"]
    assert abs(theirs["bleu"] - ours["bleu"]) <= 0.5


def test_an_export_does_not_decode_in_an_ensemble(toy_run, exported):
    result = runner.invoke(app, ["translate", "--run", str(exported), "--ensemble", str(toy_run),
                                 "a dog"])  # fmt: skip
    assert result.exit_code == 2
    assert "CTranslate2 export" in result.output


def test_an_export_where_a_run_is_needed_is_named_as_such(toy_run, exported):
    """An export as an ensemble member, a reranker, `tfm attention`'s run, or given a
    --checkpoint: one line that says an export cannot be used there, or has nothing to show."""
    cannot = f"{exported}: a CTranslate2 export cannot be used here; give the tfm run directory"
    for option in ("--ensemble", "--rerank-with"):
        args = ["translate", "--run", str(toy_run), option, str(exported), "a dog"]
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        last_line = result.stderr.splitlines()[-1]
        assert last_line == f"tfm: error: {option} {cannot} it was exported from"
    result = runner.invoke(app, ["attention", "--run", str(exported), "a dog"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        f"tfm: error: --run {exported}: a CTranslate2 export has no attention weights to show; "
        "give the tfm run directory it was exported from"
    )
    result = runner.invoke(app, ["translate", "--run", str(exported), "--checkpoint", "x.pt", "a"])
    assert result.exit_code == 2, result.output
    assert "--checkpoint needs a tfm run directory" in result.stderr


def test_eval_with_an_export_reads_aligned_files_in_chunks(exported, tmp_path, monkeypatch):
    src, ref, hyp = tmp_path / "src.txt", tmp_path / "ref.txt", tmp_path / "hyp.txt"
    src.write_text("".join(s + "\n" for s in [*SENTENCES, "the cat sleeps"] * 2), encoding="utf-8")
    ref.write_text("Der Hund\n" * 8, encoding="utf-8")
    args = ["eval", "--run", str(exported), "--src", str(src), "--ref", str(ref), "--json"]

    def scored() -> tuple[dict, str]:
        result = runner.invoke(app, [*args, "--output", str(hyp)])
        assert result.exit_code == 0, result.output
        scores = json.loads(result.stdout)
        assert scores.pop("decode_seconds") >= 0 and scores.pop("sentences_per_second") > 0
        return scores, hyp.read_text(encoding="utf-8")

    whole, whole_text = scored()
    monkeypatch.setattr(input_lines, "EVAL_LINES", 3)  # chunks of 3, 3 and 2 lines
    chunked, chunked_text = scored()
    assert chunked_text == whole_text and len(whole_text.splitlines()) == 8
    assert chunked == whole and whole["sentences"] == 8
    ref.write_text("", encoding="utf-8")
    src.write_text("", encoding="utf-8")
    empty = runner.invoke(app, args)
    assert empty.exit_code == 2, empty.output
    assert f"{src}: no sentences to score (the file is empty)" in empty.stderr

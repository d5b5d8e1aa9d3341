"""A run trained both ways in every epoch (train.bidirectional_epochs ≥ train.max_epochs) is also
a model of the reverse direction: it translates German sources into English, and it can rerank
its own beam (and its ensemble's) as the reverse model, with no second run."""

import json
import shutil
from collections.abc import Sequence

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tfm.cli import app
from tfm.prediction.reranking import Reranker
from tfm.rundir.manifest import record_manifest


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def run(both_ways_run):
    """The session's run trained both ways: the tiny en→de recipe trained on both directions
    for all of its 300 steps (tests/conftest.py)."""
    return both_ways_run


@pytest.fixture(scope="module")
def test_split(run):
    """The toy test split's English and German sides."""
    from tfm.data.pipeline import prepare_splits
    from tfm.rundir.model_file import load_trained
    from tfm.rundir.paths import find_run

    trained = load_trained(find_run(run), torch.device("cpu"))
    splits, _ = prepare_splits(trained.config.data, trained.config.tokenizer, ("test",),
                               tokenizer=trained.tokenizer)  # fmt: skip
    return splits["test"].src_text, splits["test"].tgt_text


def dropped_word_wins(
    reranker: Reranker, sources: Sequence[str], references: Sequence[str]
) -> tuple[int, int]:
    """(wins, trials): each reference against itself with one word left out, a win when the
    full reference explains its source better (a higher channel score)."""
    wins = trials = 0
    for source, reference in zip(sources, references, strict=True):
        words = reference.split()
        shorter = [" ".join(words[:i] + words[i + 1 :]) for i in range(len(words))]
        full, *dropped = reranker.channel_scores([source] * (1 + len(words)), [reference, *shorter])
        wins += sum(full > score for score in dropped)
        trials += len(dropped)
    return wins, trials


def scores(*args: str) -> dict:
    result = invoke("eval", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_run_translates_both_directions(run, test_split, tmp_path):
    english, german = test_split
    (tmp_path / "test.en").write_text("\n".join(english) + "\n", encoding="utf-8")
    (tmp_path / "test.de").write_text("\n".join(german) + "\n", encoding="utf-8")
    forward = scores("--run", str(run), "--split", "test")
    reverse = scores("--run", str(run), "--src", str(tmp_path / "test.de"),
                     "--ref", str(tmp_path / "test.en"))  # fmt: skip
    # 300 steps of a 1+1-layer model, half of them each way: 20 and 35 when written.
    assert forward["bleu"] > 12 and reverse["bleu"] > 25, (forward["bleu"], reverse["bleu"])
    # The direction comes from the input's language: German in, English out.
    assert reverse["bleu"] > 5 * scores("--run", str(run), "--src", str(tmp_path / "test.de"),
                                        "--ref", str(tmp_path / "test.de"))["bleu"]  # fmt: skip


def test_it_reranks_its_own_beam_as_the_reverse_model(run, test_split):
    from tiny_models import decode_settings

    from tfm.prediction.reranking import Reranker
    from tfm.rundir.model_file import load_trained
    from tfm.rundir.paths import find_run

    found = scores("--run", str(run), "--split", "test", "--rerank-with", str(run),
                   "--rerank-weight", "0.5")  # fmt: skip
    assert found["rerank_with"] == [str(run)] and found["beam_size"] == 5
    # What makes it a reverse model: a German hypothesis that drops a word of the reference
    # explains the English source less well.
    trained = load_trained(find_run(run), torch.device("cpu"))
    reranker = Reranker(trained.model, trained.tokenizer, decode_settings())
    wins, trials = dropped_word_wins(reranker, *test_split)
    assert trials > 300 and wins / trials > 0.85, (wins, trials)


def test_a_run_whose_last_epochs_went_one_way_is_refused(run, tmp_path):
    late = tmp_path / "late"  # the same model, but the config says epoch 30 trained en→de only
    shutil.copytree(run, late)
    config = yaml.safe_load((late / "config.yaml").read_text(encoding="utf-8"))
    config["train"]["bidirectional_epochs"] = 29
    (late / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    record_manifest(late)  # as if trained so
    result = invoke("eval", "--run", str(run), "--rerank-with", str(late))
    assert result.exit_code == 2 and result.stdout == ""
    assert f"--rerank-with {late}: it translates en→de; reranking en→de needs a run trained " \
           "de→en, or both ways in every epoch" in result.stderr  # fmt: skip
    assert "Traceback" not in result.stderr


def test_the_weight_sweep_reports_what_tfm_eval_reports_at_each_weight(run):
    """`tfm rerank-sweep` decodes and scores each split once, then re-sorts per weight: each of
    its numbers must be `tfm eval`'s for that weight (and W 0 plain beam search's), and the weight
    it chooses the best on validation (lowercased BLEU, the smaller on a tie)."""
    result = invoke("rerank-sweep", "--run", str(run), "--rerank-with", str(run), "--device",
                    "cpu", "--beam-size", "5", "--weight", "0", "--weight", "2")  # fmt: skip
    assert result.exit_code == 0, result.output
    *rows, chosen = result.stdout.splitlines()
    table = {float(row.split(" | ")[0].strip("| ")): row.strip("| ").split(" | ")[1:]
             for row in rows[2:]}  # fmt: skip
    assert list(table) == [0.0, 2.0]
    for weight, flags in ((0.0, []), (2.0, ["--rerank-with", str(run), "--rerank-weight", "2"])):
        cells = iter(table[weight])
        for split in ("validation", "test"):
            found = scores("--run", str(run), "--split", split, "--beam-size", "5", *flags)
            expected = [f"{found['bleu_lowercase']:.2f}", f"{found['bleu']:.2f}",
                        str(found["length_ratio"])]  # fmt: skip
            assert [next(cells) for _ in expected] == expected, (weight, split)
    best = max(sorted(table), key=lambda weight: float(table[weight][0]))
    assert chosen.startswith(f"chosen on validation (bleu_lowercase): W {best:g}; test ")
    assert f"test {table[best][3]} lowercased, {table[best][4]} cased (nrefs:1|" in chosen


def test_the_weight_sweep_needs_a_reverse_run(run):
    result = invoke("rerank-sweep", "--run", str(run), "--device", "cpu")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        "tfm: error: give --rerank-with RUN: the reverse-direction run(s) to rerank with\n"
    )


def test_the_sweep_chooses_the_best_validation_weight_the_smallest_on_a_tie():
    from tfm.commands.rerank_sweep import choose

    def row(validation: float, test: float) -> dict:
        return {"validation": {"bleu_lowercase": validation}, "test": {"bleu_lowercase": test}}

    table = {3.0: row(42.1, 40.0), 0.0: row(41.3, 41.0), 2.0: row(42.1, 41.9), 5.0: row(41.9, 45)}
    assert choose(table, "bleu_lowercase") == 2.0  # the test column never chooses

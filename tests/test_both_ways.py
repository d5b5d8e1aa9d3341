"""A run trained both ways in every epoch (train.bidirectional_epochs ≥ train.max_epochs) is also
a model of the reverse direction: it translates German sources into English, and it can rerank
its own beam (and its ensemble's) as the reverse model, with no second run."""

import importlib.util
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tfm.cli import app
from tfm.prediction.reranking import Reranker


@pytest.fixture
def sweep_script(monkeypatch):
    """bench/rerank_sweep.py as a module (bench/ on the path, for its shared set-up)."""
    script = Path(__file__).resolve().parents[1] / "bench" / "rerank_sweep.py"
    monkeypatch.syspath_prepend(str(script.parent))
    spec = importlib.util.spec_from_file_location("rerank_sweep", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    from tfm.prediction.reranking import Reranker
    from tfm.prediction.settings import DecodeSettings
    from tfm.rundir.model_file import load_trained
    from tfm.rundir.paths import find_run

    found = scores("--run", str(run), "--split", "test", "--rerank-with", str(run),
                   "--rerank-weight", "0.5")  # fmt: skip
    assert found["rerank_with"] == [str(run)] and found["beam_size"] == 5
    # What makes it a reverse model: a German hypothesis that drops a word of the reference
    # explains the English source less well.
    trained = load_trained(find_run(run), torch.device("cpu"))
    reranker = Reranker(trained.model, trained.tokenizer, DecodeSettings())
    wins, trials = dropped_word_wins(reranker, *test_split)
    assert trials > 300 and wins / trials > 0.85, (wins, trials)


def test_a_run_whose_last_epochs_went_one_way_is_refused(run, tmp_path):
    late = tmp_path / "late"  # the same model, but the config says epoch 30 trained en→de only
    shutil.copytree(run, late)
    config = yaml.safe_load((late / "config.yaml").read_text(encoding="utf-8"))
    config["train"]["bidirectional_epochs"] = 29
    (late / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = invoke("eval", "--run", str(run), "--rerank-with", str(late))
    assert result.exit_code == 2 and result.stdout == ""
    assert f"--rerank-with {late}: it translates en→de; reranking en→de needs a run trained " \
           "de→en, or both ways in every epoch" in result.stderr  # fmt: skip
    assert "Traceback" not in result.stderr


def test_the_weight_sweep_reports_what_tfm_eval_reports_at_each_weight(run, sweep_script):
    """bench/rerank_sweep.py decodes and scores each split once, then re-sorts per weight: each
    of its numbers must be `tfm eval`'s for that weight (and W 0 plain beam search's)."""
    from tfm.prediction.opening import open_torch
    from tfm.prediction.settings import DecodeRequest

    bench = sweep_script
    request = DecodeRequest(run=run, device="cpu", beam_size=5, rerank_with=[run],
                            rerank_weight=1.0)  # fmt: skip
    decoding = open_torch(request)
    beams = bench.decode_and_score(decoding)
    table = bench.sweep(decoding.reranker, beams, [0.0, 2.0])
    keys = ("bleu", "bleu_lowercase", "chrf", "length_ratio")
    for split in bench.SPLITS:
        plain = scores("--run", str(run), "--split", split, "--beam-size", "5")
        assert {k: table[0.0][split][k] for k in keys} == {k: plain[k] for k in keys}
        reranked = scores("--run", str(run), "--split", split, "--beam-size", "5",
                          "--rerank-with", str(run), "--rerank-weight", "2")  # fmt: skip
        assert {k: table[2.0][split][k] for k in keys} == {k: reranked[k] for k in keys}


def test_the_sweep_chooses_the_best_validation_weight_the_smallest_on_a_tie(sweep_script):
    bench = sweep_script

    def row(validation: float, test: float) -> dict:
        return {"validation": {"bleu_lowercase": validation}, "test": {"bleu_lowercase": test}}

    table = {3.0: row(42.1, 40.0), 0.0: row(41.3, 41.0), 2.0: row(42.1, 41.9), 5.0: row(41.9, 45)}
    assert bench.choose(table, "bleu_lowercase") == 2.0  # the test column never chooses

"""bench/backtranslation_choices.py --quick: back-translation by hand on a tiny toy pair, the
plan and two choices, each a change of one thing, sharing the steps they have in common."""

from pathlib import Path

import yaml
from bench_reports import tfm_in_process


def test_choices_change_one_thing_each_and_share_the_rest(script, monkeypatch):
    pairs, bench = script("pairs"), script("backtranslation_choices")
    for module in (pairs, bench):
        monkeypatch.setattr(module, "tfm", tfm_in_process)
    rows = bench.main(["--quick", "--choices", "no-tag", "sampling", "--runs", "runs"])
    assert [row["choice"] for row in rows] == ["plan", "no-tag", "sampling"]  # plan first
    runs = Path("runs")
    config = {row["choice"]: yaml.safe_load((runs / f"en-de-{row['choice']}-s0.yaml").read_text())
              for row in rows}  # fmt: skip
    real, synthetic = config["plan"]["data"]["train"]
    # The plan's rule: half a real pair's synthetic pairs, at least once (200 for 400: once).
    assert (real["repeat"], synthetic["tag"], synthetic["columns"]) == (1, "bt", ["en", "de"])
    assert "tag" not in config["no-tag"]["data"]["train"][1]
    assert config["no-tag"]["data"]["train"][1]["path"] == synthetic["path"]  # one generation
    sampled = config["sampling"]["data"]["train"][1]["path"]
    assert sampled != synthetic["path"]
    # Every usable monolingual line, in file order: none empty, none a validation or test one.
    data = runs / "data" / "en-de"
    held = {line for split in ("validation", "test")
            for line in (data / f"{split}.de").read_text().splitlines()}  # fmt: skip
    mono = (runs / "data" / "mono" / "de.txt").read_text().splitlines()
    expected = [line for line in mono if line and line not in held]
    assert len(expected) == len(mono) - 2  # quick mode added an empty line and a test one
    greedy = [line.split("\t") for line in Path(synthetic["path"]).read_text().splitlines()]
    drawn = [line.split("\t") for line in Path(sampled).read_text().splitlines()]
    assert [t for _, t in greedy] == [t for _, t in drawn] == expected
    assert [s for s, _ in greedy] != [s for s, _ in drawn]  # sampled, not the greedy output
    # One reverse run for all three; each pair the rest of the budget, in the pair's own batch.
    assert len(list(runs.glob("en-de-reverse-*.yaml"))) == 1
    shown = tfm_in_process("config", "show", "--config", str(runs / "en-de-alone.yaml"))
    batch = yaml.safe_load(shown)["train"]["max_tokens"]
    for row in rows:
        train = config[row["choice"]]["train"]
        assert train["max_tokens"] == batch and train["max_minutes"] < 5.0
        assert row["synthetic"] == len(expected) and row["steps"] == 12
        assert 0 <= row["bleu"] <= 100 and 0 <= row["reverse_bleu"] <= 100


def test_translations_keep_an_empty_first_and_last_line(script):
    # a stripped output would lose them, and every later source would pair with the wrong line
    translations = script("backtranslation_choices").translations
    assert translations("\nein Hund\n\n") == ["", "ein Hund", ""]
    assert translations("") == []

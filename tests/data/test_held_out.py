"""Validation and test held out of a training corpus that comes whole: which config gets them,
and that the held-out pairs are what the module says (by sentence, in any order or direction,
never also trained on, each pair in one place)."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest
import yaml
from builders import tiny_config_file
from typer.testing import CliRunner

from tfm.cli import app
from tfm.config import Config, DataConfig
from tfm.data import held_out as held_out_module
from tfm.data.cache.prepared_cache import prepared_entry
from tfm.data.held_out import default_pairs, held_out, sentence_hash
from tfm.data.pipeline import load_texts
from tfm.errors import DataError

N_SENTENCES = 400


def corpus() -> list[tuple[str, str]]:
    """English–French-like pairs: every fifth English sentence has a second translation, and
    every seventh pair is written twice."""
    pairs = []
    for i in range(N_SENTENCES):
        pairs.append((f"sentence {i} in english .", f"phrase {i} en français ."))
        if i % 5 == 0:
            pairs.append((f"sentence {i} in english .", f"autre phrase {i} ."))
        if i % 7 == 0:
            pairs.append(pairs[-1])
    return pairs


def write_tsv(path, pairs) -> str:
    path.write_text("".join(f"{en}\t{fr}\n" for en, fr in pairs), encoding="utf-8")
    return str(path)


def data_config(path: str, src_lang="en", tgt_lang="fr", **splits) -> DataConfig:
    train = {"format": "tsv", "path": path, "columns": ["en", "fr"]}
    return DataConfig(src_lang=src_lang, tgt_lang=tgt_lang, train=train, **splits)


@pytest.fixture
def tsv(tmp_path) -> str:
    return write_tsv(tmp_path / "train.tsv", corpus())


def pair_set(src, tgt) -> set[tuple[str, str]]:
    return set(zip(src, tgt, strict=True))


def test_a_split_not_named_is_held_out_of_a_corpus_but_the_toy_keeps_its_own(tsv):
    data = data_config(tsv)
    assert (data.validation.format, data.test.format) == ("held_out", "held_out")
    named = {"format": "tsv", "path": tsv, "columns": ["en", "fr"]}
    test_named = data_config(tsv, test=named)
    assert (test_named.validation.format, test_named.test.format) == ("held_out", "tsv")
    validation_named = data_config(tsv, validation=named)  # as before: test is the toy corpus's
    assert (validation_named.validation.format, validation_named.test.format) == ("tsv", "toy")
    toy = DataConfig()
    assert (toy.validation.format, toy.test.format) == ("toy", "toy")
    sized = data_config(tsv, validation={"pairs": 50})  # as `--set data.validation.pairs=50`
    assert (sized.validation.format, sized.validation.pairs, sized.test.format) == (
        "held_out", 50, "held_out"
    )  # fmt: skip
    held_from_toy = DataConfig(validation={"format": "held_out", "pairs": 3})
    assert held_from_toy.validation.pairs == 3


def test_held_out_is_refused_where_it_cannot_mean_anything(tsv):
    with pytest.raises(pydantic.ValidationError, match="data.train: format 'held_out' is for"):
        DataConfig(train={"format": "held_out"})
    with pytest.raises(pydantic.ValidationError, match="pairs has no effect with format 'tsv'"):
        data_config(tsv, test={"format": "tsv", "path": tsv, "columns": ["en", "fr"], "pairs": 4})


def test_held_out_sentences_take_all_their_pairs_and_training_reads_none(tsv):
    data = data_config(tsv)
    everything = corpus()
    train_src, train_tgt, train_report = load_texts(data, "train")
    val_src, val_tgt, val_report = load_texts(data, "validation")
    test_src, test_tgt, _ = load_texts(data, "test")
    distinct = len(set(everything))
    wanted = default_pairs(len(everything))
    assert wanted == round(len(everything) / 20)  # 5%: the default
    assert len(set(val_src)) == len(set(test_src)) == wanted
    assert not set(val_src) & set(test_src)
    assert not (set(val_src) | set(test_src)) & set(train_src)  # no held-out sentence trained on
    held = pair_set(val_src, val_tgt) | pair_set(test_src, test_tgt)
    assert len(val_src) + len(test_src) == len(held)  # each distinct pair once
    # every pair of a held-out sentence is held out; every other pair is trained on, repeats too
    assert held == {pair for pair in set(everything) if pair[0] in set(val_src) | set(test_src)}
    assert len(train_src) == sum(pair not in held for pair in everything)
    assert len(held) + len(pair_set(train_src, train_tgt)) == distinct
    left_out = len(everything) - len(train_src)
    assert train_report.dropped == {"held out for validation and test": left_out}
    assert train_report.summary().startswith(
        f"train: read {len(everything)} pairs from {tsv}, kept {len(train_src)}, dropped "
        f"{left_out} (held out for validation and test: {left_out} at lines "
    )
    assert val_report.summary() == (
        f"validation: read {len(val_src)} pairs from {tsv} (held out), kept {len(val_src)}, "
        "dropped 0"
    )
    in_file_order = dict.fromkeys(pair for pair in everything if pair[0] in set(val_src))
    assert list(zip(val_src, val_tgt, strict=True)) == list(in_file_order)


def test_the_report_names_the_lines_of_held_out_pairs(tmp_path):
    pairs = [("", "vide")] + corpus()  # line 1 is dropped as empty: lines still count from 1
    path = write_tsv(tmp_path / "train.tsv", pairs)
    data = data_config(path)
    found = held_out(data)
    assert found is not None
    _, _, report = load_texts(data, "train")
    lines = report.first["held out for validation and test"]
    assert lines and all(found.withholds(pairs[line - 1]) for line in lines)
    assert lines == [n for n, pair in enumerate(pairs, 1) if pair[0] and found.withholds(pair)][:3]


def test_the_choice_follows_sentences_not_order_direction_or_the_other_split(tmp_path, tsv):
    base = data_config(tsv)
    shuffled_pairs = corpus()
    random.Random(0).shuffle(shuffled_pairs)
    shuffled = data_config(write_tsv(tmp_path / "shuffled.tsv", shuffled_pairs))
    reverse = data_config(tsv, src_lang="fr", tgt_lang="en")
    named = {"format": "tsv", "path": tsv, "columns": ["en", "fr"]}
    given = data_config(tsv, validation={"format": "held_out"}, test=named)
    for split in ("validation", "test"):
        src, tgt, _ = load_texts(base, split)
        expected = pair_set(src, tgt)
        assert pair_set(*load_texts(shuffled, split)[:2]) == expected
        fr, en, _ = load_texts(reverse, split)
        assert pair_set(en, fr) == expected
    expected = pair_set(*load_texts(base, "validation")[:2])
    assert pair_set(*load_texts(given, "validation")[:2]) == expected


def test_pairs_sets_the_size_and_too_many_is_one_error(tsv):
    data = data_config(tsv, validation={"format": "held_out", "pairs": 50})
    assert len(set(load_texts(data, "validation")[0])) == 50
    with pytest.raises(DataError) as error:
        big = {"format": "held_out", "pairs": 100_000}  # every sentence
        load_texts(data_config(tsv, validation=big, test=big), "validation")
    assert str(error.value) == (
        f"data.validation is held out of data.train: data.train ({tsv}) has {len(corpus())} "
        f"pairs: too few to hold out {len(set(corpus()))} "
        "for validation and test and train on the rest; give data.validation and data.test (or a "
        "smaller `pairs`)"
    )


def test_a_held_out_split_whose_corpus_is_gone_says_where_it_comes_from(tmp_path):
    path = write_tsv(tmp_path / "train.tsv", corpus())
    data = data_config(path)
    Path(path).unlink()
    with pytest.raises(DataError) as error:
        load_texts(data, "test")
    assert str(error.value) == (
        f"data.test is held out of data.train: {path}: no such file (check data.train.path)"
    )


def test_one_pass_a_process_until_the_file_changes(tsv, monkeypatch):
    passes = []
    original = held_out_module._hold_out
    monkeypatch.setattr(held_out_module, "_hold_out", lambda *a: passes.append(1) or original(*a))
    data = data_config(tsv)
    held_out_module._found.clear()
    load_texts(data, "validation")
    load_texts(data, "test")
    load_texts(data, "train")
    assert len(passes) == 1
    write_tsv(Path(tsv), corpus()[:300])
    assert len(set(load_texts(data, "validation")[0])) == default_pairs(300)
    assert len(passes) == 2


@pytest.mark.parametrize("repeat", [1, 2])
def test_the_read_that_chooses_them_trains_on_what_a_read_that_knows_them_does(tsv, repeat):
    """The training read that holds out as it reads (lets every pair through, then leaves out
    the chosen ones) gives the pairs, held-out splits and report of a read told them before,
    for a repeated corpus and one after it too."""
    first = {"format": "tsv", "path": tsv, "columns": ["en", "fr"], "repeat": repeat}
    data = DataConfig(src_lang="en", tgt_lang="fr", train=[first, {**first, "repeat": 1}])
    held_out_module._found.clear()
    chosen = load_texts(data, "train")  # chooses as it reads
    found = held_out_module._found.copy()
    told = load_texts(data, "train")  # told: they are known now
    assert held_out_module._found == found
    assert chosen[:2] == told[:2] and chosen[2].summary() == told[2].summary()
    assert (chosen[2].first, chosen[2].skipped) == (told[2].first, told[2].skipped)
    held_out_module._found.clear()
    own_pass = held_out(data)  # the pass of their own
    assert own_pass is not None and [own_pass.pairs] == [f.pairs for f in found.values()]


def test_the_cached_training_split_leaves_them_out_under_its_own_key(tmp_path, tsv):
    settings = {
        "run_dir": str(tmp_path / "run"),
        "data": {"src_lang": "en", "tgt_lang": "fr",
                 "train": {"format": "tsv", "path": tsv, "columns": ["en", "fr"]}},
        "tokenizer": {"vocab_size": 100, "min_frequency": 1},
    }  # fmt: skip
    config = Config.model_validate(settings)
    entry = prepared_entry(config)
    train_src, _, _ = load_texts(config.data, "train")
    assert list(entry.texts("src").read(0, len(train_src) + 1)) == train_src
    assert entry.report().summary() == load_texts(config.data, "train")[2].summary()
    given = {"format": "tsv", "path": tsv, "columns": ["en", "fr"]}
    whole = Config.model_validate(
        {**settings, "data": {**settings["data"], "validation": given, "test": given}}
    )
    whole_entry = prepared_entry(whole)
    assert whole_entry.where() != entry.where()
    assert whole_entry.report().kept == len(corpus())


def test_sentence_hash_is_the_same_in_every_process():
    script = "from tfm.data.held_out import sentence_hash; print(sentence_hash('Ein Hund läuft.'))"
    seen = {
        subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": seed},
                       capture_output=True, text=True, check=True).stdout.strip()
        for seed in ("1", "2")
    }  # fmt: skip
    assert seen == {str(sentence_hash("Ein Hund läuft."))}


def test_train_then_eval_on_a_config_that_names_only_train(tmp_path, monkeypatch, tsv):
    """The whole path: `tfm train` validates on the held-out validation split, and `tfm eval`
    scores the held-out test split, its sentences those the module picks."""
    monkeypatch.chdir(tmp_path)
    data = {"src_lang": "en", "tgt_lang": "fr",
            "train": {"format": "tsv", "path": tsv, "columns": ["en", "fr"]}}  # fmt: skip
    config = tiny_config_file(tmp_path, data=data, max_steps=2, validate_every=2)
    assert "validation" not in yaml.safe_load(config.read_text(encoding="utf-8"))["data"]
    runner = CliRunner()
    trained = runner.invoke(app, ["train", "--config", str(config), "--no-progress"])
    assert trained.exit_code == 0, trained.output
    logged = trained.stderr
    test_src, _, _ = load_texts(data_config(tsv), "test")
    val_src, _, _ = load_texts(data_config(tsv), "validation")
    assert f"validation: read {len(val_src)} pairs from {tsv} (held out)" in logged
    assert "held out for validation and test: " in logged
    scored = runner.invoke(app, ["eval", "--run", str(tmp_path / "run"), "--json"])
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.stdout)["sentences"] == len(test_src)
    assert f"test: read {len(test_src)} pairs from {tsv} (held out)" in scored.stderr


def test_a_config_naming_validation_but_no_test_gets_no_toy_test_of_its_model(
    tmp_path, monkeypatch
):
    """Beside a validation split the test split is not held out; its default, the toy corpus,
    would score a model of other data on a grammar it never saw, even in the toy's languages:
    `tfm eval` says so instead of scoring it, and a toy validation split is refused likewise."""
    monkeypatch.chdir(tmp_path)
    pairs = [(en, fr.replace("phrase", "Satz")) for en, fr in corpus()]
    path = write_tsv(tmp_path / "train.tsv", pairs)
    columns = ["en", "de"]
    data = {"src_lang": "en", "tgt_lang": "de",
            "train": {"format": "tsv", "path": path, "columns": columns},
            "validation": {"format": "tsv", "path": path, "columns": columns}}  # fmt: skip
    config = tiny_config_file(tmp_path, data=data, max_steps=2, validate_every=2)
    runner = CliRunner()
    trained = runner.invoke(app, ["train", "--config", str(config), "--no-progress"])
    assert trained.exit_code == 0, trained.output
    scored = runner.invoke(app, ["eval", "--run", str(tmp_path / "run")])
    assert scored.exit_code == 2 and scored.stdout == ""
    assert scored.stderr.splitlines()[-1] == (
        "tfm: error: data.test is the built-in toy corpus (what a config that names no test "
        "split gets beside a validation split), which can only test a model trained on it, not "
        "on data.train's 'tsv' source: give data.test in the config (or score files: tfm eval "
        "--src FILE --ref FILE)"
    )
    data["validation"] = {"format": "toy"}
    toy_validation = tiny_config_file(tmp_path, data=data, name="toy_validation")
    refused = runner.invoke(app, ["train", "--config", str(toy_validation), "--no-progress"])
    assert refused.exit_code == 2
    assert "data.validation is the built-in toy corpus" in refused.stderr.splitlines()[-1]

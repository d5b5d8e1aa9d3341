"""A data-only config trained end to end: the plan is derived from the measured corpus, logged,
written to the run's config.yaml, shown by `tfm config show` without training, kept when the
run resumes, and never overrides what the config sets."""

import logging
import re

import pytest
import torch
import yaml
from typer.testing import CliRunner

import tfm.device as device_module
import tfm.training.recipe.plan as plan_module
from tfm.cli import app
from tfm.config import Config, load_config
from tfm.data.corpus_figures import figures_from, measure_texts
from tfm.training.recipe.checks import check_texts
from tfm.training.recipe.plan import show_planned, unset_keys

DATA_ONLY = {
    "data": {"toy": {"n_train": 400, "n_validation": 8, "n_test": 8, "seed": 2}},
    "train": {"max_steps": 4, "threads": 1, "tensorboard": False},
}


def config_file(folder, **sections) -> str:
    settings = {"run_dir": str(folder / "run"), **DATA_ONLY, **sections}
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return str(path)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_a_data_only_config_trains_with_the_plan_it_logs_and_stores(tmp_path, caplog):
    config = config_file(tmp_path)
    assert len(unset_keys(load_config(config))) == 22  # every recipe key but train.max_steps
    with caplog.at_level(logging.INFO):
        result = invoke("train", "--config", config, "--no-progress")
    assert result.exit_code == 0, result.output
    log = caplog.text
    assert "recipe from the data:" in log
    assert "best validation bleu " in log  # the derived metric, named in the done line
    assert "corpus en→de: 400 pairs; words a sentence" in log
    stored = load_config(tmp_path / "run" / "config.yaml")
    assert f"BPE {stored.tokenizer.vocab_size:,}: tokens a sentence" in log
    assert stored.tokenizer.vocab_size == 1000  # the toy's few hundred word types: the floor
    assert (stored.model.d_model, stored.model.n_encoder_layers) == (128, 2)  # the xs rung
    assert stored.train.max_steps == 4 and stored.train.schedule == "cosine"
    assert stored.train.decay_steps == 4 - stored.train.warmup_steps
    assert stored.decoding.beam_size == 5
    assert unset_keys(stored) == []  # the stored config sets every key: the plan is in it


def test_config_show_prints_the_plan_training_would_use(tmp_path):
    config = config_file(tmp_path)
    shown = invoke("config", "show", "--config", config)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith("# recipe from the data:\n#   corpus en→de: 400 pairs")
    derived = unset_keys(load_config(config))
    rules = re.findall(r"^#   ([a-z_]+\.[a-z_]+) = (.+?)  ← (.+)$", shown.stdout, re.M)
    assert [key for key, _, _ in rules] == derived  # every derived key, with its rule
    assert all(rule and rule != "no rule" for _, _, rule in rules)
    (tmp_path / "shown.yaml").write_text(shown.stdout, encoding="utf-8")
    result = invoke("train", "--config", config, "--no-progress")
    assert result.exit_code == 0, result.output
    trained = load_config(tmp_path / "run" / "config.yaml")
    assert load_config(tmp_path / "shown.yaml") == trained


def test_the_plan_says_how_many_pairs_data_max_length_keeps(tmp_path):
    """The corpus line counts the pairs read; the rules after the BPE line count those training
    keeps, and where data.max_length drops some, the BPE line says how many are left."""
    config = config_file(tmp_path)
    plain = invoke("config", "show", "--config", config).stdout
    assert "#   corpus en→de: 400 pairs" in plain and "pairs within data.max_length" not in plain
    assert "epochs of 400 pairs" in plain  # the dropout rule's count
    cut = invoke("config", "show", "--config", config, "--set", "data.max_length=8")
    assert cut.exit_code == 0, cut.output
    (kept,) = re.findall(r"^#   BPE [\d,]+ \(the (\d+) pairs within data.max_length=8\): ",
                         cut.stdout, re.M)  # fmt: skip
    assert 0 < int(kept) < 400 and f"epochs of {kept} pairs" in cut.stdout
    assert "#   corpus en→de: 400 pairs" in cut.stdout


def test_a_given_key_at_odds_with_a_runs_plan_is_one_line_not_a_traceback(tmp_path):
    """Heads that do not divide the planned width, given to a run already planned: resuming it
    names the conflict and the way out; a plain start says the run exists, as for any change."""
    config = config_file(tmp_path)
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    resumed = invoke("train", "--config", config, "--no-progress", "--resume",
                     "--set", "model.n_heads=3")  # fmt: skip
    assert resumed.exit_code == 2, resumed.output
    assert resumed.stderr.splitlines()[-1] == (
        f"tfm: error: the config's keys do not fit the plan that {tmp_path / 'run'} was trained "
        "with (d_model=128 is not divisible by n_heads=3): give the run's own values, or start "
        "it again with --overwrite"
    )
    again = invoke("train", "--config", config, "--no-progress", "--set", "model.n_heads=3")
    assert again.exit_code == 2 and "already exists; use --resume" in again.stderr
    assert "Traceback" not in resumed.stderr + again.stderr


def test_keys_the_config_sets_win_over_the_recipe(tmp_path):
    config = config_file(
        tmp_path,
        tokenizer={"vocab_size": 300},
        model={"d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1},
    )
    result = invoke("train", "--config", config, "--no-progress", "--set", "train.lr=0.003")
    assert result.exit_code == 0, result.output
    stored = load_config(tmp_path / "run" / "config.yaml")
    assert stored.tokenizer.vocab_size == 300 and stored.train.lr == 0.003
    assert (stored.model.d_model, stored.model.n_heads, stored.model.n_encoder_layers) == (32, 2, 1)
    assert stored.model.d_ff == 128  # not given: 4 · the given d_model


def test_a_resumed_run_keeps_its_plan_and_a_finished_one_is_recognised(tmp_path, caplog):
    config = config_file(tmp_path)
    assert invoke("train", "--config", config, "--no-progress").exit_code == 0
    first = load_config(tmp_path / "run" / "config.yaml")
    again = invoke("train", "--config", config, "--no-progress")
    assert again.exit_code == 0 and "already trained with this config" in again.stderr
    caplog.clear()
    with caplog.at_level(logging.INFO):
        resumed = invoke(
            "train", "--config", config, "--resume", "--no-progress", "--set", "train.max_steps=6"
        )
    assert resumed.exit_code == 0, resumed.output
    assert "recipe from the data" not in caplog.text  # the stored plan, not a new one
    second = load_config(tmp_path / "run" / "config.yaml")
    assert second.train.max_steps == 6
    same = {k: v for k, v in second.model_dump()["train"].items() if k != "max_steps"}
    assert same == {k: v for k, v in first.model_dump()["train"].items() if k != "max_steps"}
    assert second.model == first.model and second.tokenizer == first.tokenizer


def test_a_tiny_corpus_and_identical_sides_are_named_at_start(tmp_path, caplog):
    config = config_file(tmp_path, data={"toy": {"n_train": 120, "n_validation": 4, "n_test": 4}})
    with caplog.at_level(logging.WARNING):
        result = invoke("train", "--config", config, "--no-progress")
    assert result.exit_code == 0, result.output
    assert "data.train: only 120 sentence pairs, too few to learn translation from" in caplog.text
    figures = measure_texts(["same", "same", "other"], ["same", "same", "andere"])
    assert round(figures.identical, 2) == 0.67


def test_lines_out_of_step_are_named_at_start():
    """Pairs whose lengths follow each other, then the same with the target one line behind;
    and pairs as noisy in length as the shifted ones, but aligned."""
    lengths = [1 + (7 * i) % 13 for i in range(400)]
    src = [" ".join(["wort"] * n) for n in lengths]
    tgt = [" ".join(["word"] * n) + " ." for n in lengths]
    config = load_config(None)
    aligned, shifted = measure_texts(src, tgt), measure_texts(src[1:], tgt[:-1])
    assert aligned.off_ratio == 0.0 and aligned.length_correlation > 0.99
    assert shifted.off_ratio > 0.3 and shifted.length_correlation < 0.1
    assert check_texts(aligned, config) == []
    [warning] = check_texts(shifted, config)
    assert warning.startswith(f"data.train: {shifted.off_ratio:.0%} of the pairs are more than 2 ")
    assert "correlation" in warning and "out of step" in warning and "tfm data check" in warning
    noisy = [t if i % 3 else t + " und so weiter und so fort" for i, t in enumerate(tgt)]
    loose = measure_texts(src, noisy)  # a third of the targets padded: off, yet following
    assert loose.off_ratio > 0.05 and loose.length_correlation > 0.5
    assert check_texts(loose, config) == []
    assert figures_from(shifted.record()) == shifted
    older = {
        k: v for k, v in shifted.record().items() if k not in ("off_ratio", "length_correlation")
    }
    assert (figures_from(older).off_ratio, figures_from(older).length_correlation) == (0.0, 1.0)
    words = measure_texts(["Hund", "Katze"] * 200, ["dog", "cat"] * 200)  # a word list
    assert words.length_correlation == 1.0 and check_texts(words, config) == []


def test_unspaced_scripts_count_characters_as_words():
    figures = measure_texts(["I see a cat."], ["猫が見える。"])
    assert figures.tgt.unspaced and not figures.src.unspaced
    assert figures.tgt.words == 5  # 猫 が 見 え る: five characters of CJK and hiragana
    assert figures.src.words == 4 and figures.tgt.script in ("CJK", "HIRAGANA")


THAI = ["ฉันชอบกินข้าวผัด", "เขาไปโรงเรียนทุกวัน", "วันนี้อากาศดีมาก", "แมวนอนบนโต๊ะ"]


@pytest.mark.parametrize(("tgt_lang", "metric"), [("th", "chrf"), ("zh", "bleu")])
def test_a_script_without_spaces_and_without_a_bleu_tokenizer_picks_by_chrf(
    tmp_path, tgt_lang, metric
):
    """BLEU on Thai text (no spaces, no sacreBLEU tokenizer) would score every hypothesis 0
    with 13a: validation could never improve it. Chinese has `zh`, which splits characters."""
    pairs = [(f"sentence number {i}", text) for i, text in enumerate(THAI * 10)]
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{en}\t{tgt}\n" for en, tgt in pairs), encoding="utf-8")
    split = {"format": "tsv", "path": str(tsv), "columns": ["en", tgt_lang]}
    data = {"src_lang": "en", "tgt_lang": tgt_lang, "train": split, "validation": split}
    shown = invoke("config", "show", "--config", config_file(tmp_path, data=data))
    assert shown.exit_code == 0, shown.output
    chosen = re.search(r"^#   train\.early_stopping_metric = (\w+)  ← (.+)$", shown.stdout, re.M)
    assert chosen and chosen.group(1) == metric, shown.stdout


def test_the_defaults_config_has_every_recipe_key_unset():
    assert len(unset_keys(Config())) == 23


def test_tfm_average_averages_the_planned_checkpoints_by_default(tmp_path, caplog):
    config = config_file(tmp_path)
    # patience off: this toy run learns nothing in 20 steps, and would cool down early
    result = invoke("train", "--config", config, "--no-progress", "--set", "train.max_steps=20",
                    "--set", "train.patience=null")  # fmt: skip
    assert result.exit_code == 0, result.output
    stored = load_config(tmp_path / "run" / "config.yaml")
    assert stored.train.average_last == 5 and stored.train.checkpoint_every == 1
    with caplog.at_level(logging.INFO):
        averaged = invoke("average", "--run", str(tmp_path / "run"), "--out", str(tmp_path / "a"))
    assert averaged.exit_code == 0, averaged.output
    assert "averaged 5 checkpoints (step-00000016.pt, step-00000017.pt" in caplog.text
    short = config_file(tmp_path / "short") if (tmp_path / "short").mkdir() is None else None
    assert invoke("train", "--config", short, "--no-progress").exit_code == 0
    refused = invoke(
        "average", "--run", str(tmp_path / "short" / "run"), "--out", str(tmp_path / "b")
    )
    assert refused.exit_code == 2
    assert "plans no averaging (train.average_last: 1); give --last N or --best N" in refused.stderr


def test_a_time_budget_is_divided_by_the_step_timed_on_this_machine(tmp_path, monkeypatch):
    import tfm.training.recipe.plan as plan

    monkeypatch.setattr(plan, "busy_machine", lambda: "load 9.0 on 2 CPUs")
    train = {"max_minutes": 0.5, "threads": 1, "tensorboard": False}  # no step budget given
    shown = invoke("config", "show", "--config", config_file(tmp_path, train=train))
    assert shown.exit_code == 0, shown.output
    assert "# warning: the steps were timed on a busy machine (load 9.0 on 2 CPUs)" in shown.stdout
    found = re.search(r"train\.max_minutes=0\.5 at ([\d.]+) s a step: ([\d,]+) steps", shown.stdout)
    assert found, shown.stdout
    seconds, steps = float(found[1]), int(found[2].replace(",", ""))
    assert 0 < seconds < 30 and steps >= 1
    (tmp_path / "shown.yaml").write_text(shown.stdout, encoding="utf-8")
    planned = load_config(tmp_path / "shown.yaml")  # the timed length is the run's length
    assert planned.train.max_steps == steps and planned.train.max_epochs is None
    assert planned.train.decay_steps == steps - planned.train.warmup_steps


@pytest.mark.parametrize("precision", ["auto", "fp32", "bf16"])
def test_config_show_times_steps_in_the_precision_training_uses(tmp_path, monkeypatch, precision):
    # on a GPU with bf16, where `auto` trains with bf16 autocast but decodes in float32
    cuda = torch.device("cuda")
    monkeypatch.setattr(plan_module, "select_device", lambda name: cuda)
    monkeypatch.setattr(device_module, "cuda_bf16_supported", lambda: True)
    timed = []

    def planned(config, *, device, dtype, **kwargs):
        timed.append((device, dtype))
        raise RuntimeError("timed")

    monkeypatch.setattr(plan_module, "plan_run", planned)
    with pytest.raises(RuntimeError, match="timed"):
        show_planned(config_file(tmp_path), [f"train.precision={precision}"])
    assert timed == [(cuda, device_module.training_precision(precision, cuda))]
    assert timed[0][1] == (torch.float32 if precision == "fp32" else torch.bfloat16)

"""Training with monolingual text (`data.monolingual`): the reverse run of its own with the pair's
tokenizer, the synthetic corpus beside the run (leaks left out), the pair trained on both with
the tag; the plan in plan.json and at the start of train.log; the same command twice trains
once; killed in any phase and resumed, it ends exactly where an uninterrupted run does."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from builders import metric_events, tiny_settings, train_losses
from typer.testing import CliRunner

from tfm.api import generate_toy_corpus
from tfm.cli import app
from tfm.commands import synthetic_corpus as synthetic
from tfm.commands import train as train_command
from tfm.commands.backtranslated import _check_sources
from tfm.config import Config, load_config
from tfm.data.tokenizer import Tokenizer
from tfm.errors import TrainingError
from tfm.training import StopFlag
from tfm.training.recipe.phase_budget import MIN_MINUTES, plan_phases

SRC = str(Path(__file__).resolve().parents[2] / "src")
SETTINGS = {
    "tokenizer": {"vocab_size": 200},
    "model": {"d_model": 32, "d_ff": 64},
    "train": {"max_steps": 20, "max_epochs": None, "validate_every": 10, "checkpoint_every": 5,
              "keep_last": 4, "average_last": 2, "max_tokens": 1000},
}  # fmt: skip


def write_corpus(folder: Path) -> dict:
    """Toy en→de text files (300 training pairs), German text of 400 other lines with a blank
    line and a test sentence in it, and the config's data section."""
    corpus = generate_toy_corpus(n_train=300, n_validation=8, n_test=8, seed=1)
    mono = generate_toy_corpus(n_train=400, n_validation=1, n_test=1, seed=2)["train"]
    for split, pairs in corpus.items():
        for side, lang in enumerate(("en", "de")):
            text = "".join(pair[side] + "\n" for pair in pairs)
            (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")
    lines = [german for _, german in mono] + ["", corpus["test"][0][1]]
    (folder / "mono.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    splits = {split: {"format": "text", "path": str(folder / split)} for split in corpus}
    return {**splits, "monolingual": [{"path": str(folder / "mono.de"), "lang": "de"}]}


def config_file(folder: Path, **overrides) -> Path:
    settings = tiny_settings(SETTINGS, run_dir=str(folder / "run"), **overrides)
    settings["data"] = {**write_corpus(folder), **overrides.get("data", {})}
    path = folder / "bt.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return path


def train(config: Path, *args: str):
    return CliRunner().invoke(app, ["train", "--config", str(config), "--no-progress", *args])


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bt")
    result = train(config_file(folder))
    assert result.exit_code == 0, result.output
    return folder / "run"


def test_the_phases_leave_a_reverse_run_a_synthetic_corpus_and_the_pair_trained_on_both(run):
    reverse = load_config(run / "reverse" / "config.yaml")
    assert (reverse.data.src_lang, reverse.data.tgt_lang) == ("de", "en")
    pair, reverse_tokens = Tokenizer.load(run), Tokenizer.load(run / "reverse")
    assert pair.tags == ("bt",) and reverse_tokens.fingerprint() == pair.fingerprint()
    assert (run / "reverse-averaged" / "best.pt").is_file()  # its last 2 checkpoints
    rows = [line.split("\t") for line in text(run / "synthetic.tsv").splitlines()]
    mono = text(run.parent / "mono.de").splitlines()
    tested = set(text(run.parent / "test.de").splitlines())
    assert len(rows) == 400 and all(len(row) == 2 for row in rows)
    assert [target for _, target in rows] == [line for line in mono if line and line not in tested]
    state = json.loads(text(run / "backtranslation.json"))
    assert state["generation"] | {"seconds": 0} == {
        "done": True,
        "lines": 400,
        "seconds": 0,
        "examined": 401,
        "leaks": 1,
        "long": 0,
    }
    config = load_config(run / "config.yaml")
    synthetic_corpus = config.data.corpora[1]
    assert (synthetic_corpus.path, synthetic_corpus.tag) == (str(run / "synthetic.tsv"), "bt")
    plan = json.loads(text(run / "plan.json"))["backtranslation"]
    assert plan["plan"]["lines"] == 401 and plan["reverse"]["done"]  # one a leak
    log = text(run / "train.log")
    assert log.index("phase 1, the reverse model: its own recipe") < log.index("step 10 valid")
    assert "step 10 validation" in text(run / "reverse" / "train.log")


def test_the_same_command_again_trains_nothing(run):
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    result = train(run.parent / "bt.yaml")
    assert result.exit_code == 0, result.output
    assert "already trained with this config" in result.stderr
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before


class StopAt(StopFlag):
    """A stop request, as SIGINT makes one, once `count(run)` reaches `at`."""

    def __init__(self, run: Path, count, at: int) -> None:
        super().__init__()
        self.run, self.count, self.at = run, count, at

    @property
    def requested(self) -> bool:
        if self.signal_name is None and self.count(self.run) >= self.at:
            self.signal_name = "SIGINT"
        return self.signal_name is not None


def steps(run: Path) -> int:
    path = run / "metrics.jsonl"
    return path.read_text("utf-8").count("train_loss") if path.exists() else 0


def lines(path: Path) -> int:
    return len(path.read_text("utf-8").splitlines()) if path.exists() else 0


def text(path: Path) -> str:
    return path.read_text("utf-8")


def test_killed_in_every_phase_and_resumed_it_ends_as_the_run_that_was_not(
    run, tmp_path, monkeypatch
):
    config, ours = config_file(tmp_path), tmp_path / "run"
    kills = [  # where each kill comes, and what the run holds then
        (StopAt(ours / "reverse", steps, 7), (7, 0, 0)),  # in the reverse run
        (StopAt(ours / "synthetic.tsv", lines, 100), (20, 100, 0)),  # after two batches of 50
        (StopAt(ours, steps, 7), (20, 400, 7)),  # in the pair's run
    ]
    monkeypatch.setattr(synthetic, "BATCH_LINES", 50)
    for i, (kill, holds) in enumerate(kills):
        monkeypatch.setattr(train_command, "StopFlag", lambda kill=kill: kill)
        result = train(config, *(["--resume"] if i else []))
        assert result.exit_code == 130, result.output
        assert "Resume with" in result.stderr
        assert (steps(ours / "reverse"), lines(ours / "synthetic.tsv"), steps(ours)) == holds
    monkeypatch.undo()
    result = train(config, "--resume")
    assert result.exit_code == 0, result.output
    assert text(ours / "synthetic.tsv") == text(run / "synthetic.tsv")  # no line lost or twice
    for folder in ("reverse", "."):
        assert train_losses(ours / folder) == train_losses(run / folder)
        ours_bleu, theirs_bleu = (metric_events(r / folder, "val_bleu") for r in (ours, run))
        assert [e["val_loss"] for e in ours_bleu] == [e["val_loss"] for e in theirs_bleu]


def test_a_line_cut_by_a_kill_is_written_again_whole(run, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(run, folder)
    state = json.loads(text(folder / "backtranslation.json"))
    state["generation"]["done"] = False
    del state["pair"]
    (folder / "backtranslation.json").write_text(json.dumps(state), encoding="utf-8")
    kept = text(run / "synthetic.tsv").splitlines(keepends=True)[:123]
    (folder / "synthetic.tsv").write_text("".join(kept) + "a line cut sho", encoding="utf-8")
    assert synthetic.whole_lines(folder / "synthetic.tsv") == 123
    assert text(folder / "synthetic.tsv") == "".join(kept)


def test_the_plan_divides_the_budget_and_leaves_back_translation_out_of_a_short_one():
    config = Config.model_validate({"train": {"max_minutes": 60}})
    plan = plan_phases(config, real_pairs=10_000, available=50_000)
    assert (plan.reverse_s, plan.generation_cap_s, plan.lines, plan.repeat) == (900, 360, 40_000, 2)
    assert plan.describe()[1] == "phase 1, the reverse model: 15.0 minutes (25% of 60 minutes)"
    short = plan_phases(Config.model_validate({"train": {"max_minutes": MIN_MINUTES / 2}}),
                        real_pairs=10_000, available=50_000)  # fmt: skip
    assert short.skipped and short.describe()[0].startswith("back-translation left out: ")
    few = plan_phases(config, real_pairs=10_000, available=3_000)
    assert (few.lines, few.repeat) == (3_000, 1)
    kept = plan_phases(config, real_pairs=10_000, available=50_000, real_batch=512)
    assert kept.max_tokens == 512 and kept.describe()[3].endswith("batches of its real pairs")
    given = Config.model_validate({"train": {"max_minutes": 60, "max_tokens": 2048}})
    assert (
        plan_phases(given, real_pairs=10_000, available=50_000, real_batch=512).max_tokens is None
    )


def test_a_budget_too_short_for_back_translation_trains_what_the_pair_alone_trains(tmp_path):
    """Under MIN_MINUTES the plan leaves the text out and says why; the run is the one its
    config without `data.monolingual` trains, step for step, with no phase's files."""
    short = {"train.max_minutes": MIN_MINUTES / 2}
    runs = {}
    for name, data in (("with-text", {}), ("alone", {"monolingual": []})):
        (tmp_path / name).mkdir()
        result = train(config_file(tmp_path / name, data=data, **short))
        assert result.exit_code == 0, result.output
        runs[name] = (tmp_path / name / "run", result.stderr)
    (with_text, told), (alone, _) = runs["with-text"], runs["alone"]
    assert "back-translation left out: " in told
    losses = train_losses(with_text)
    assert len(losses) >= 2 and losses == train_losses(alone)
    assert Tokenizer.load(with_text).fingerprint() == Tokenizer.load(alone).fingerprint()
    assert not (with_text / "reverse").exists() and not (with_text / "synthetic.tsv").exists()


def test_config_show_says_the_phases_and_reads_back_as_the_config(tmp_path):
    config = config_file(tmp_path)
    settings = yaml.safe_load(config.read_text(encoding="utf-8"))
    del settings["train"]["label_smoothing"]  # a key for the recipe to derive
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    result = CliRunner().invoke(app, ["config", "show", "--config", str(config)])
    assert result.exit_code == 0, result.output
    shown = result.stdout.splitlines()
    assert shown[4] == f"# recipe of {tmp_path / 'run' / 'reverse'}, from the data:"
    assert shown[5].startswith("#   corpus de→en: 300 pairs")
    assert shown[0] == "# back-translation in no time budget: 401 monolingual lines, 300 real pairs"
    assert shown[3].startswith("# phase 3, the pair: real pairs ×1 and synthetic pairs tagged <bt>")
    back = tmp_path / "shown.yaml"
    back.write_text(result.stdout, encoding="utf-8")
    assert load_config(back) == load_config(config)


def test_under_torchrun_process_0_generates_while_the_other_waits(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    short = {"max_steps": 6, "validate_every": 6, "checkpoint_every": 3}  # what it is, not how well
    config = config_file(tmp_path, train={"device": "cpu", "lr": 0.01, **short})
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               f"--log-dir={tmp_path / 'logs'}", "-m", "tfm", "train", "--config", str(config),
               "--no-progress"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "process 0 prepares the data and back-translates while the other 1 wait" in done.stderr
    ours = tmp_path / "run"
    assert lines(ours / "synthetic.tsv") == 400  # written once, by one process
    assert (ours / "reverse" / "best.pt").is_file() and (ours / "best.pt").is_file()


def test_a_reverse_model_that_translates_everything_to_nothing_stops_the_run(tmp_path, caplog):
    (tmp_path / "synthetic.tsv").write_text("\tEin Hund\n\tZwei Katzen\n", encoding="utf-8")
    with pytest.raises(TrainingError, match=r"translated all 2 monolingual lines to nothing"):
        _check_sources(tmp_path, 2)
    (tmp_path / "synthetic.tsv").write_text("a dog\tEin Hund\n\tZwei Katzen\n", encoding="utf-8")
    _check_sources(tmp_path, 2)
    assert "1 of 2 synthetic sources came out empty" in caplog.text

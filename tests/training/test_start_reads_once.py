"""Start-up reads each corpus once: `tfm train` on a data-only config (only `data.train`, its
validation and test held out of it) opens the training files once (one pass holds out, hashes,
measures and encodes them), and a second start on unchanged files, or `tfm eval` of the
held-out test split, reads nothing but the cache; an edited file is read again."""

import pathlib
import sys

import pytest
import yaml
from typer.testing import CliRunner

from tfm.api import generate_toy_corpus
from tfm.cli import app
from tfm.data import held_out
from tfm.data.cache import cache_entry


@pytest.fixture
def opened(monkeypatch):
    """The paths opened through pathlib since the fixture started, in order."""
    paths: list[pathlib.Path] = []
    real = pathlib.Path.open

    def recording(self, *args, **kwargs):
        paths.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", recording)
    return paths


def corpus(folder: pathlib.Path, splits=("train", "validation")) -> dict:
    """Text files of 400 toy pairs (train) and 10 (validation), and the data of a config that
    names `splits`."""
    pairs = generate_toy_corpus(n_train=400, n_validation=10, n_test=10, seed=4)
    for split in splits:
        for side, lang in enumerate(("en", "de")):
            lines = "".join(pair[side] + "\n" for pair in pairs[split])
            (folder / f"{split}.{lang}").write_text(lines, encoding="utf-8")
    return {split: {"format": "text", "path": str(folder / split)} for split in splits}


def test_the_training_files_are_read_once_and_then_not_at_all(tmp_path, opened, monkeypatch):
    checks: list[int] = []  # the start-ups' checks of a cache entry's files, one row each
    check = cache_entry.changed_files
    counted = lambda folder, digests: checks.append(1) or check(folder, digests)  # noqa: E731
    monkeypatch.setattr(cache_entry, "changed_files", counted)
    data = {"src_lang": "en", "tgt_lang": "de", **corpus(tmp_path, ("train",))}
    config = tmp_path / "run.yaml"
    settings = {"run_dir": str(tmp_path / "run"), "data": data,
                "train": {"max_steps": 2, "threads": 1, "tensorboard": False}}  # fmt: skip
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    train_files = {tmp_path / "train.en", tmp_path / "train.de"}

    def reads() -> list[pathlib.Path]:
        return [p for p in opened if p in train_files]

    def start(*args: str) -> str:
        """`tfm` with `args` as a new process would run it: with nothing found before."""
        held_out._found.clear()
        opened.clear()
        checks.clear()
        result = CliRunner().invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.stderr

    logged = start("train", "--config", str(config), "--no-progress")
    assert "held out for validation and test: " in logged
    assert sorted(reads()) == sorted(train_files)  # each opened once: held out as it was read
    logged = start("train", "--config", str(config), "--no-progress", "--overwrite")
    assert "validation: read 20 pairs from " in logged
    assert reads() == []  # the cache names and holds it, held-out splits too: no file is read
    assert checks == [1]  # and the entry it holds is checked (its files hashed) once
    logged = start("eval", "--run", str(tmp_path / "run"))
    assert "test: read 20 pairs from " in logged
    assert reads() == []  # the held-out test split is the cache's too
    (tmp_path / "train.de").write_text(
        (tmp_path / "train.de").read_text(encoding="utf-8").replace("Hund", "Hunde", 1),
        encoding="utf-8",
    )
    start("train", "--config", str(config), "--no-progress", "--overwrite")
    assert sorted(reads()) == sorted(train_files)  # an edited file is read (once) again


def crossings_to_the_first_step(config: pathlib.Path) -> int:
    """Calls from one tfm module into another (a generator's resumption counts as a call) made
    by `tfm train --config` before its first optimizer step."""
    count, done = 0, False

    def profile(frame, event, _arg):
        nonlocal count, done
        module = frame.f_globals.get("__name__", "")
        if done or event != "call" or not module.startswith("tfm"):
            return
        if frame.f_code.co_name == "optimizer_step":
            done = True
            return
        caller = frame.f_back
        while caller is not None and not caller.f_globals.get("__name__", "").startswith("tfm"):
            caller = caller.f_back
        if caller is not None and caller.f_globals["__name__"] != module:
            count += not frame.f_code.co_name.startswith("<")  # not comprehensions, lambdas

    runner = CliRunner()
    sys.setprofile(profile)
    try:
        result = runner.invoke(app, ["train", "--config", str(config), "--no-progress"])
    finally:
        sys.setprofile(None)
    assert result.exit_code == 0, result.output
    return count


def test_start_up_crosses_few_module_boundaries_cold_and_warm(tmp_path):
    """The layers hand on a corpus a chunk at a time, not a pair at a time: the count of
    crossings does not grow with the corpus. Before chunks, 400 pairs made 2,542 crossings
    cold (1,225 of them three per pair) and 1,287 warm; the bounds are half of those."""
    data = {"src_lang": "en", "tgt_lang": "de", **corpus(tmp_path)}
    runs = []
    for name in ("cold", "warm"):
        config = tmp_path / f"{name}.yaml"
        settings = {"run_dir": str(tmp_path / name), "data": data,
                    "train": {"max_steps": 1, "threads": 1, "tensorboard": False}}  # fmt: skip
        config.write_text(yaml.safe_dump(settings), encoding="utf-8")
        runs.append(crossings_to_the_first_step(config))
    cold, warm = runs
    assert warm < cold <= 2542 // 2 and warm <= 1287 // 2, runs

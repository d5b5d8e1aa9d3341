"""Runs trained once for the whole test session and read by many tests (`SHARED_RUNS`: fixtures in
tests/conftest.py and tests/deploy/conftest.py).

A shared run is built by the first process that asks for it, under a file lock, in a folder that
every pytest-xdist worker of the session sees (the parent of the workers' temporary folders); the
others wait and use it. Tests never change a shared run: `copy_run` gives one to damage or resume.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import resource
import shutil
from collections.abc import Callable
from pathlib import Path

import yaml
from builders import BOTH_WAYS, TRAINED, merge, tiny_config_file, tiny_settings
from typer.testing import CliRunner

from tfm.cli import app
from tfm.config import Config, load_config
from tfm.training import train

DONE = "built.json"  # written last: a folder without it is a build that did not finish


def session_folder(base: Path) -> Path:
    """Where this session keeps its shared runs: `base` (the session's temporary folder), or its
    parent, which all of pytest-xdist's workers share."""
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_run(tmp_path_factory, fixture: str) -> Path:
    """The run of `SHARED_RUNS[fixture]`, built once in the session's shared folder."""
    name, build = SHARED_RUNS[fixture]
    folder = session_folder(tmp_path_factory.getbasetemp()) / name
    built_once(folder, build)
    return folder / "run"


def built_once(folder: Path, build: Callable[[Path], dict]) -> dict:
    """What `build(folder)` returned (saved as JSON in `folder`), building it unless a process of
    this session already did."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = folder / DONE
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed half-way
            folder.mkdir()
            done.write_text(json.dumps(build(folder)), encoding="utf-8")
        return json.loads(done.read_text(encoding="utf-8"))


def train_with_tfm(folder: Path, *recipes: dict, **overrides: object) -> dict:
    """`tfm train` in this process of the tiny config (`builders.tiny_settings`) into `folder/run`,
    from `folder`, where tfm remembers the run: its stdout, its stderr and this process's peak
    memory afterwards, in MiB."""
    config = tiny_config_file(folder, *recipes, **overrides)
    with contextlib.chdir(folder):
        result = CliRunner().invoke(app, ["train", "--config", str(config), "--no-progress"])
    assert result.exit_code == 0, result.output
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"stdout": result.stdout, "stderr": result.stderr, "peak_mib": peak_mib}


def build_trained(folder: Path) -> dict:
    return train_with_tfm(folder, TRAINED)


def build_both_ways(folder: Path) -> dict:
    return train_with_tfm(folder, TRAINED, BOTH_WAYS)


def build_export_toy(folder: Path) -> dict:
    """The export tests' run: d_model 64, 1 + 1 layers, 400 steps on 4,000 toy pairs (validation
    BLEU about 20), the toy test split of 200 held-out sentences; its greedy translations are
    real sentences, with near-ties between tokens as rare as in use. About ten seconds."""
    sets = [
        f"run_dir={folder / 'run'}",
        "data.toy.n_train=4000",
        "data.toy.n_validation=20",
        "data.toy.n_test=200",
        "tokenizer.vocab_size=200",
        "model.d_model=64",
        "model.n_heads=4",
        "model.n_encoder_layers=1",
        "model.n_decoder_layers=1",
        "model.d_ff=128",
        "model.dropout=0.0",
        "train.max_steps=400",
        "train.validate_every=400",
        "train.max_tokens=1500",
        "train.lr=5e-3",
        "train.warmup_steps=30",
        "train.log_every=100",
        "decoding.max_len_b=10",
        "decoding.strategy=greedy",  # what the tests compare is greedy unless they ask
    ]
    train(load_config(None, sets), progress_bar=False)
    return {}


def build_related(folder: Path) -> dict:
    """A run of one source into two made-up targets (`data.related`, one-to-many): English words
    into `aa` (the same words in capitals, the main pair) and `bb` (each word with a `z` at its
    end). 150 steps of a 32-wide model learn both (validation BLEU about 65), so the target tag
    alone decides which comes out; each validation scores `bb`'s own split too. About five
    seconds."""
    rng = random.Random(0)
    words = "cat dog sun moon tree rock blue red big small fast slow old new one two".split()

    def sentences(n: int) -> list[str]:
        return [" ".join(rng.choice(words) for _ in range(rng.randint(2, 4))) for _ in range(n)]

    def write(name: str, lang: str, texts: list[str], into: Callable[[str], str]) -> str:
        (folder / f"{name}.en").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        targets = [" ".join(map(into, text.split())) for text in texts]
        (folder / f"{name}.{lang}").write_text("".join(t + "\n" for t in targets), "utf-8")
        return str(folder / name)

    def related(word: str) -> str:
        return word + "z"

    valid = write("valid", "aa", sentences(20), str.upper)
    settings = {
        "run_dir": str(folder / "run"),
        "data": {
            "src_lang": "en",
            "tgt_lang": "aa",
            "train": {"format": "text", "path": write("aa", "aa", sentences(400), str.upper)},
            "validation": {"format": "text", "path": valid},
            "test": {"format": "text", "path": write("test", "aa", sentences(20), str.upper)},
            "related": [{"format": "text", "path": write("bb", "bb", sentences(400), related),
                         "src_lang": "en", "tgt_lang": "bb", "validation": {
                             "format": "text",
                             "path": write("valid-bb", "bb", sentences(20), related)}}],
        },
        "tokenizer": {"vocab_size": 150},
        "model": {"d_model": 32, "d_ff": 64, "dropout": 0.0},
        "train": {"max_steps": 150, "max_epochs": None, "lr": 5e-3, "warmup_steps": 20},
        "decoding": {"max_len_b": 5},
    }  # fmt: skip
    write("test-bb", "bb", sentences(20), related)
    config = Config.model_validate(merge(tiny_settings(), settings))
    train(config, progress_bar=False)
    return {}


# fixture name -> (its folder in the session's shared folder, what builds it); conftest builds the
# ones the collected tests need first, side by side on pytest-xdist's workers.
SHARED_RUNS: dict[str, tuple[str, Callable[[Path], dict]]] = {
    "trained_run": ("trained", build_trained),
    "both_ways_run": ("both-ways", build_both_ways),
    "toy_run": ("export-toy", build_export_toy),
    "related_run": ("related", build_related),
}


def copy_run(run: Path, to: Path) -> Path:
    """A copy of the run directory `run` at `to` whose config.yaml names `to` as its run_dir, so
    that `tfm train --resume` of it writes there; returns `to`."""
    shutil.copytree(run, to)
    config_file = to / "config.yaml"
    settings = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    settings["run_dir"] = str(to)
    config_file.write_text(
        yaml.safe_dump(settings, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    return to

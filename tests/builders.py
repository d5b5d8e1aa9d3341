"""The one builder of the tiny configurations that tests train, and the run-file readers they share.

`tiny_settings(**overrides)` is a config as nested dicts (what a YAML file holds);
`tiny_config(run_dir, **overrides)` the validated `Config`, for `train()` in this process;
`tiny_config_file(folder, **overrides)` the same as a YAML file (folder/run.yaml for the run
folder/run), for `tfm` commands and child processes. The base is a 1+1-layer, d_model-16 model on
120 toy pairs that trains in a second, on one thread (runs compared bit for bit use one thread
count). Overrides come in three spellings, applied in order:

- a bare key is a `train.` key, what tests vary most: `max_steps=4`;
- a dotted key sets one value anywhere: `**{"model.dropout": 0.2}`;
- a section (or `run_dir`) merges into the config, dicts key by key: `model={"d_ff": 64}`.

A value of None sets null (`max_epochs=None`: no epoch limit). Recipes that several files share
are dicts of overrides, given first: `tiny_config(run, WIDER, max_steps=10)`.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from pathlib import Path

import yaml

from tfm.config import RECIPE_KEYS, Config
from tfm.rundir.metrics import read_metrics

SECTIONS = frozenset(Config.model_fields)  # run_dir, data, tokenizer, model, train, decoding

BASE = {
    "data": {"toy": {"n_train": 120, "n_validation": 6, "n_test": 6}},
    "tokenizer": {"vocab_size": 150},
    "model": {
        "d_model": 16,
        "n_heads": 2,
        "n_encoder_layers": 1,
        "n_decoder_layers": 1,
        "d_ff": 32,
    },
    "train": {"max_tokens": 800, "log_every": 1, "warmup_steps": 2, "threads": 1},
    "decoding": {"max_len_b": 2},
}

# Every key the recipe derives is given, as §5 of the paper sets it unless BASE says otherwise:
# these tests describe training as configured (tests/training/recipe describes the recipe).
GIVEN = {
    "model": {"dropout": 0.1},
    "train": {"max_steps": None, "max_epochs": 30, "lr": None, "schedule": "inverse_sqrt",
              "decay_steps": None, "label_smoothing": 0.1, "validate_every": 1000, "patience": None,
              "checkpoint_every": None, "keep_last": 3, "average_last": 1,
              "early_stopping_metric": "bleu"},
    "decoding": {"strategy": "greedy", "beam_size": 5},
}  # fmt: skip
for _section, _keys in GIVEN.items():
    for _key, _value in _keys.items():
        BASE[_section].setdefault(_key, _value)
assert all(k in BASE[s] for s, keys in RECIPE_KEYS.items() for k in keys), "a recipe key unset"

# A 32-wide model with dropout on 240 pairs: epochs of several batches and random masks, what the
# exact-resume, interruption, compile and data-parallel tests compare step by step.
WIDER = {
    "data": {"toy": {"n_train": 240, "n_validation": 8, "n_test": 8}},
    "tokenizer": {"vocab_size": 200},
    "model": {"d_model": 32, "d_ff": 64, "dropout": 0.2},
    "train": {"max_tokens": 1000, "validate_every": 1000, "warmup_steps": 4, "lr": 3e-3},
    "decoding": {"max_len_b": 3},
}

# A 64-wide model that learns the toy grammar in 200 steps (validation BLEU about 25): the shared
# trained run (tests/conftest.py), with checkpoints at steps 100, 150 and 200.
TRAINED = {
    "data": {"toy": {"n_train": 3000, "n_validation": 60, "n_test": 60, "seed": 3}},
    "tokenizer": {"vocab_size": 400},
    "model": {"d_model": 64, "n_heads": 4, "d_ff": 128, "dropout": 0.0},
    "train": {
        "max_steps": 200,
        "validate_every": 100,
        "checkpoint_every": 50,
        "log_every": 25,
        "lr": 5e-3,
        "warmup_steps": 50,
        "max_tokens": 2500,
    },
    "decoding": {"max_len_b": 5},
}

# Added to TRAINED: both ways in every epoch for 300 steps, a model of de→en as well (test BLEU
# near 20 en→de and 35 de→en): the shared run trained both ways.
BOTH_WAYS = {
    "train": {
        "max_steps": 300,
        "max_epochs": 30,
        "bidirectional_epochs": 30,
        "validate_every": 300,
        "checkpoint_every": None,
    },
}


def merge(into: dict, changes: Mapping) -> dict:
    """Nested `changes` merged into `into` (changed in place and returned): dicts key by key,
    anything else replaced."""
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = copy.deepcopy(dict(value) if isinstance(value, Mapping) else value)
    return into


def nested(key: str, value: object) -> dict:
    """One override as nested sections: "max_steps" is train.max_steps, "a.b" is {a: {b: value}},
    a section name is that section."""
    if "." not in key and key not in SECTIONS:
        key = f"train.{key}"
    *sections, last = key.split(".")
    change: dict = {last: value}
    for section in reversed(sections):
        change = {section: change}
    return change


def tiny_settings(*recipes: Mapping, **overrides: object) -> dict:
    """The tiny config as nested dicts: BASE, then each recipe, then `overrides` in order."""
    settings = copy.deepcopy(BASE)
    for recipe in recipes:
        merge(settings, recipe)
    for key, value in overrides.items():
        merge(settings, nested(key, value))
    return settings


def tiny_config(run_dir: str | Path, *recipes: Mapping, **overrides: object) -> Config:
    """The validated tiny config of the run `run_dir` (see `tiny_settings`)."""
    return Config.model_validate(tiny_settings(*recipes, run_dir=str(run_dir), **overrides))


def tiny_config_file(folder: Path, *recipes: Mapping, name: str = "run", **overrides) -> Path:
    """The tiny config of the run `folder/name` (unless `run_dir=` says otherwise), written as
    YAML to `folder/name.yaml`, which is returned."""
    settings = tiny_settings(*recipes, run_dir=str(Path(folder) / name), **overrides)
    Config.model_validate(settings)  # a mistake in a test's overrides fails here, not in a child
    path = Path(folder) / f"{name}.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    return path


class _Skipped(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def metric_events(run: Path, key: str | None = None) -> list[dict]:
    """The events of `run`'s metrics.jsonl as `read_metrics` reads them (those with `key`, if
    given); a line that it would skip (torn, not JSON) fails the test instead."""
    logger = logging.getLogger("tfm.rundir.metrics")
    skipped = _Skipped()
    logger.addHandler(skipped)
    try:
        events = read_metrics(Path(run) / "metrics.jsonl")
    finally:
        logger.removeHandler(skipped)
    assert not skipped.messages, skipped.messages
    return [e for e in events if key is None or key in e]


def train_losses(run: Path) -> list[tuple[int, float]]:
    """(step, train_loss) of each training line of `run`'s metrics."""
    return [(e["step"], e["train_loss"]) for e in metric_events(run, "train_loss")]


def logged_losses(run: Path) -> tuple[list[float], float]:
    """The train losses of every logged step of `run`, and its one validation loss."""
    (validation,) = metric_events(run, "val_loss")
    return [loss for _, loss in train_losses(run)], validation["val_loss"]

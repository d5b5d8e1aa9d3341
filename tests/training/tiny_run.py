"""The tiny toy-corpus run that the subprocess tests (`test_interrupt`, `test_distributed`) train,
written as a YAML file so that a `tfm` or `torchrun` child process can read it."""

import json
from pathlib import Path

import yaml


def write_tiny_config(
    path: Path, run: Path, *, n_train: int, n_eval: int, dropout: float, max_len_b: int, train: dict
) -> Path:
    """A 1+1-layer, d_model-32 model on `n_train` toy pairs (`n_eval` validation and test pairs),
    with `train` overriding or adding `train.*` keys; written to `path`, which is returned."""
    config = {
        "run_dir": str(run),
        "data": {"toy": {"n_train": n_train, "n_validation": n_eval, "n_test": n_eval}},
        "tokenizer": {"vocab_size": 200},
        "model": {
            "d_model": 32,
            "n_heads": 2,
            "n_encoder_layers": 1,
            "n_decoder_layers": 1,
            "d_ff": 64,
            "dropout": dropout,
        },
        # One thread, set in the config: the losses of a run and of its resumption are compared
        # bit for bit, and a child process would otherwise pick its own thread count.
        "train": {"log_every": 1, "warmup_steps": 4, "lr": 3e-3, "threads": 1, **train},
        "decoding": {"max_len_b": max_len_b},
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def logged_losses(run: Path) -> tuple[list[float], float]:
    """The train losses of every logged step of `run`, and its one validation loss."""
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    losses = [e["train_loss"] for e in events if "train_loss" in e]
    (val_loss,) = [e["val_loss"] for e in events if "val_loss" in e]
    return losses, val_loss

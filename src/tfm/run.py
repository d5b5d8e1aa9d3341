"""A run directory: what training leaves behind and what eval/translate need.

    run_dir/
      config.yaml        the resolved config the run was trained with
      tokenizer.json     the BPE tokenizer (see tfm.data.tokenizer for separate vocabularies)
      best.pt            model weights with the best validation score (+ how to build the model)
      last.pt            model weights after the last step
      checkpoints/       full training states (model, optimizer, RNGs, data position) for --resume
      metrics.jsonl      one JSON object per event, each with "step"

The run most recently trained from a directory is remembered in `.tfm/last_run` there, so that
`tfm train && tfm eval && tfm translate` works without naming the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from tfm.checkpoint import atomic_write_text, load_checkpoint, save_checkpoint
from tfm.config import Config, load_config
from tfm.data.tokenizer import Tokenizer
from tfm.errors import CheckpointError, UsageError
from tfm.transformer import ModelArgs, Transformer, build_model

LAST_RUN_FILE = Path(".tfm") / "last_run"


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def best(self) -> Path:
        return self.root / "best.pt"

    @property
    def last(self) -> Path:
        return self.root / "last.pt"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"


def remember_run(run_dir: Path, cwd: Path | None = None) -> None:
    """Record `run_dir` as the most recent run trained from `cwd`."""
    pointer = (cwd or Path.cwd()) / LAST_RUN_FILE
    pointer.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(str(run_dir.resolve()) + "\n", pointer)


def find_run(run: str | Path | None, cwd: Path | None = None) -> RunPaths:
    """The run named by `--run`, or the one most recently trained from `cwd`."""
    if run is None:
        pointer = (cwd or Path.cwd()) / LAST_RUN_FILE
        if not pointer.is_file():
            raise UsageError(
                "no run given and none trained from this directory yet; "
                "run `tfm train --config CONFIG` first or pass --run DIR"
            )
        run = pointer.read_text(encoding="utf-8").strip()
    paths = RunPaths(Path(run))
    if not paths.root.is_dir():
        raise UsageError(
            f"run directory {paths.root} does not exist; pass --run DIR of a trained run"
        )
    if not paths.best.is_file() and not paths.last.is_file():
        raise UsageError(
            f"run directory {paths.root} has no trained model (best.pt or last.pt); "
            "train it first with `tfm train`"
        )
    return paths


def save_model(
    path: Path, model: torch.nn.Module, model_args: dict, *, step: int, tokenizer_fingerprint: str
) -> None:
    """Write a model's weights with what is needed to rebuild it, atomically."""
    save_weights(
        path, model.state_dict(), model_args, step=step, tokenizer_fingerprint=tokenizer_fingerprint
    )


def save_weights(
    path: Path, weights: dict, model_args: dict, *, step: int, tokenizer_fingerprint: str
) -> None:
    """Write a state dict as a model file; refuses non-finite weights."""
    for name, tensor in weights.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"refusing to write {path}: parameter {name} is not finite")
    state = {
        "kind": "model",
        "model_args": model_args,
        "model": on_cpu(weights),
        "step": step,
        "tokenizer_fingerprint": tokenizer_fingerprint,
    }
    save_checkpoint(state, path)


def on_cpu(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict detached and on the CPU, tied weights still tied: a tensor under several
    names (the shared embeddings and the output projection) stays one tensor, which the file
    then stores once. Moving each name on its own would copy it once per name from a GPU."""
    moved: dict[tuple, torch.Tensor] = {}
    out = {}
    for name, t in weights.items():
        key = tie_key(t)
        if key not in moved:
            moved[key] = t.detach().to("cpu")
        out[name] = moved[key]
    return out


def tie_key(t: torch.Tensor) -> tuple:
    """Equal for two tensors that are the same memory seen the same way (tied weights)."""
    return (t.device, t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()))


def load_model_file(path: Path) -> dict:
    """Read a model file written by `save_model` (safely: tensors and plain containers only)."""
    state = load_checkpoint(path)
    for key in ("model_args", "model", "tokenizer_fingerprint"):
        if key not in state:
            raise CheckpointError(f"{path} is not a tfm model file (no '{key}')")
    return state


def is_finite_score(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


@dataclass
class TrainedModel:
    """A trained model ready to decode, with its tokenizer and the config it was trained with."""

    model: Transformer
    tokenizer: Tokenizer
    config: Config
    paths: RunPaths
    step: int


def load_trained(paths: RunPaths, device: torch.device) -> TrainedModel:
    """Load best.pt (or last.pt), check that the tokenizer belongs to it, and build the model."""
    path = paths.best if paths.best.is_file() else paths.last
    state = load_model_file(path)
    tokenizer = Tokenizer.load(paths.root)
    args = state["model_args"]
    sizes = (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
    if state["tokenizer_fingerprint"] != tokenizer.fingerprint() or sizes != (
        args["src_vocab_size"],
        args["tgt_vocab_size"],
    ):
        raise CheckpointError(
            f"the tokenizer in {paths.root} does not match {path} (vocabulary sizes {sizes} vs "
            f"{(args['src_vocab_size'], args['tgt_vocab_size'])} or different tokens); "
            "was the run directory changed by hand?"
        )
    model = build_model(ModelArgs.from_stored(args))
    model.load_state_dict(state["model"])
    model.to(device).eval()
    config = load_config(paths.config, stored=True)
    return TrainedModel(model, tokenizer, config, paths, int(state.get("step", 0)))

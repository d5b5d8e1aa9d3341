"""Model files (`best.pt`, `last.pt`): a model's weights with what is needed to rebuild it.

A model file is a checkpoint (`tfm.rundir.checkpoint`) holding `kind` "model", `model_args` (the
keywords of `build_model`), `model` (the state dict, on the CPU, tied weights stored once), `step`
and `tokenizer_fingerprint`, so that a model is never paired with another run's tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from tfm.config import Config, load_config
from tfm.data.tokenizer import Tokenizer
from tfm.errors import CheckpointError
from tfm.rundir.checkpoint import load_checkpoint, save_checkpoint
from tfm.rundir.manifest import check_manifest, replacing
from tfm.rundir.paths import RunPaths
from tfm.rundir.store import MODEL_KIND
from tfm.transformer import ModelArgs, Transformer, build_model


def save_model(
    path: Path, model: torch.nn.Module, model_args: dict, *, step: int, tokenizer_fingerprint: str
) -> None:
    """Write a model's weights with what is needed to rebuild it, atomically, its digest in the
    run's manifest (`tfm.rundir.manifest`)."""
    save_weights(
        path, model.state_dict(), model_args, step=step, tokenizer_fingerprint=tokenizer_fingerprint
    )


def save_weights(
    path: Path, weights: dict, model_args: dict, *, step: int, tokenizer_fingerprint: str
) -> None:
    """Write a state dict as a model file, its digest in the run's manifest; refuses non-finite
    weights (before writing)."""
    state = {
        "kind": MODEL_KIND,
        "model_args": model_args,
        "model": on_cpu(weights),
        "step": step,
        "tokenizer_fingerprint": tokenizer_fingerprint,
    }
    with replacing(path) as before_write:
        save_checkpoint(state, path, before_write=before_write)


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


@dataclass
class TrainedModel:
    """A trained model ready to decode, with its tokenizer and the config it was trained with."""

    model: Transformer
    tokenizer: Tokenizer
    config: Config
    paths: RunPaths
    step: int
    model_file: Path  # the file the weights came from


def load_trained(
    paths: RunPaths, device: torch.device, *, model_file: Path | None = None
) -> TrainedModel:
    """Load best.pt (or last.pt, or `model_file`: a model file or step checkpoint of the run),
    check that the tokenizer belongs to it, and build the model."""
    path = model_file or (paths.best if paths.best.is_file() else paths.last)
    if path.parent.resolve() == paths.root.resolve():  # best.pt or last.pt: in the manifest
        check_manifest(paths.root, [path.name])
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
    step = state["step"] if "step" in state else state.get("progress", {}).get("step", 0)
    return TrainedModel(model, tokenizer, config, paths, int(step), path)

"""Model files keep tied weights tied (stored once) and refuse what is not a model file."""

import pytest
import torch

from tfm.errors import CheckpointError
from tfm.rundir.checkpoint import save_checkpoint
from tfm.rundir.model_file import load_model_file, on_cpu, save_weights


def test_tied_weights_stay_one_tensor_on_the_cpu_and_in_the_file(tmp_path):
    shared, other = torch.randn(5, 3), torch.randn(3)
    weights = {"embedding": shared, "output": shared, "bias": other}

    moved = on_cpu(weights)

    assert moved["embedding"] is moved["output"] and moved["bias"] is not moved["embedding"]
    save_weights(tmp_path / "best.pt", weights, {"d_model": 3}, step=7, tokenizer_fingerprint="f")
    state = load_model_file(tmp_path / "best.pt")
    model = state["model"]
    assert model["embedding"].data_ptr() == model["output"].data_ptr()
    assert torch.equal(model["output"], shared) and torch.equal(model["bias"], other)
    assert (state["step"], state["model_args"], state["kind"]) == (7, {"d_model": 3}, "model")


def test_a_checkpoint_without_model_args_is_not_a_model_file(tmp_path):
    save_checkpoint({"model": {}, "tokenizer_fingerprint": "f"}, tmp_path / "x.pt")
    with pytest.raises(CheckpointError, match=r"x.pt is not a tfm model file \(no 'model_args'\)"):
        load_model_file(tmp_path / "x.pt")

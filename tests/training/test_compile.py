"""train.compile: training steps run through torch.compile and learn what eager steps learn."""

import shutil

import pytest
import torch
from builders import WIDER, logged_losses, tiny_config, train_losses
from torch._dynamo.utils import counters

from tfm.errors import UsageError
from tfm.rundir.checkpoint import load_checkpoint
from tfm.training import data_parallel, train

STEPS = 4


def run_tiny(tmp_path, name: str, *, compile: bool, **keys):
    """Train STEPS steps without dropout (compiled code draws its own random numbers, so masks
    would differ), in batches of up to 4096 tokens; the losses, the validation loss and the
    weights."""
    run = tmp_path / name
    keys = {"max_steps": STEPS, "validate_every": STEPS, "max_tokens": 4096, **keys}
    config = tiny_config(run, WIDER, **{"model.dropout": 0.0}, compile=compile, **keys)
    train(config, progress_bar=False)
    return *logged_losses(run), load_checkpoint(run / "last.pt")["model"]


@pytest.fixture
def fresh_dynamo():
    """No compiled code or counts from earlier tests, and none left for later ones."""
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def test_compiled_training_steps_equal_eager_ones_and_save_the_plain_model(
    tmp_path, compile_backend
):
    # Dropout 0: compiled code draws its own random numbers, so masks would differ.
    eager_losses, eager_val_loss, eager_weights = run_tiny(tmp_path, "eager", compile=False)
    assert counters["stats"]["unique_graphs"] == 0
    losses, val_loss, weights = run_tiny(tmp_path, "compiled", compile=True)
    assert counters["stats"]["unique_graphs"] >= 1  # it did go through torch.compile
    assert len(losses) == len(eager_losses) == STEPS
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    # The weights themselves differ where Adam scales up rounding noise (the key projection's
    # bias gets no gradient but noise); what they compute does not.
    assert val_loss == pytest.approx(eager_val_loss, rel=1e-4)
    assert weights.keys() == eager_weights.keys()  # no "_orig_mod." prefixes in checkpoints


def test_compile_on_cpu_without_a_cpp_compiler_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setattr(data_parallel.shutil, "which", lambda name: None)
    with pytest.raises(UsageError, match=r"^train.compile: .* needs a C\+\+ compiler"):
        run_tiny(tmp_path, "nocxx", compile=True, device="cpu")


@pytest.mark.slow  # four compilations of a tiny model on the CPU: about a minute
@pytest.mark.skipif(
    not any(shutil.which(c) for c in data_parallel._CXX), reason="inductor needs a C++ compiler"
)
def test_a_compiled_static_shape_run_resumes_exactly(tmp_path, fresh_dynamo):
    # Dropout on: the compiled steps' random numbers must continue where they stopped too.
    keys = {"compile": True, "static_shapes": True, "max_tokens": 1000}
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(tiny_config(straight, WIDER, max_steps=6, **keys), progress_bar=False)
    train(tiny_config(resumed, WIDER, max_steps=3, **keys), progress_bar=False)
    train(tiny_config(resumed, WIDER, max_steps=6, **keys), resume=True, progress_bar=False)
    assert counters["stats"]["unique_graphs"] >= 1  # it did go through torch.compile
    losses = train_losses(straight)
    assert len(losses) == 6 and train_losses(resumed) == losses
    weights = load_checkpoint(straight / "last.pt")["model"]
    resumed_weights = load_checkpoint(resumed / "last.pt")["model"]
    assert all(torch.equal(resumed_weights[k], w) for k, w in weights.items())

"""Training on a CUDA GPU: float32 steps equal the CPU's to rounding, bf16 autocast stays close
to them, a GPU run's files are what a CPU run's are, and a run trained on the GPU is scored and
used on the CPU alike. Skipped without a GPU (CI has none)."""

import json

import pytest
import torch
from builders import WIDER, logged_losses, tiny_config
from typer.testing import CliRunner

from tfm.cli import app
from tfm.rundir.checkpoint import load_checkpoint
from tfm.training import train

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("full_float32"),
]

STEPS = 6


def run_tiny(tmp_path, name: str, **train_keys):
    """Train STEPS steps without dropout, in batches of up to 4096 tokens: the run, its losses
    and its validation loss."""
    run = tmp_path / name
    keys = {"max_steps": STEPS, "validate_every": STEPS, "max_tokens": 4096, **train_keys}
    train(tiny_config(run, WIDER, **{"model.dropout": 0.0}, **keys), progress_bar=False)
    return run, *logged_losses(run)


def test_float32_steps_on_cuda_equal_the_cpu_and_bf16_steps_stay_close(tmp_path):
    _, cpu_losses, cpu_val = run_tiny(tmp_path, "on-cpu", device="cpu", precision="fp32")
    _, losses, val = run_tiny(tmp_path, "on-gpu", device="cuda", precision="fp32")
    assert len(losses) == len(cpu_losses) == STEPS
    assert losses == pytest.approx(cpu_losses, rel=1e-4)
    assert val == pytest.approx(cpu_val, rel=1e-4)
    _, bf16_losses, bf16_val = run_tiny(tmp_path, "on-gpu-bf16", device="cuda", precision="bf16")
    assert bf16_losses == pytest.approx(cpu_losses, rel=2e-2)
    assert bf16_val == pytest.approx(cpu_val, rel=2e-2)
    assert bf16_losses != losses  # it did run in bf16


def test_a_run_trained_on_cuda_scores_and_translates_the_same_on_the_cpu(tmp_path):
    run, _, _ = run_tiny(tmp_path, "gpu", device="cuda", precision="fp32", max_steps=40,
                         validate_every=40)  # fmt: skip

    def invoke(*args: str) -> str:
        result = CliRunner().invoke(app, [*args, "--run", str(run)])
        assert result.exit_code == 0, result.output
        return result.stdout

    sentences = ["the small dog sees the big cat", "a red bird sings"]
    scores = {d: json.loads(invoke("eval", "--json", "--device", d)) for d in ("cuda", "cpu")}
    assert scores["cpu"]["bleu"] == pytest.approx(scores["cuda"]["bleu"], abs=1e-6)
    assert scores["cpu"]["chrf"] == pytest.approx(scores["cuda"]["chrf"], abs=1e-6)
    outputs = {d: invoke("translate", *sentences, "--device", d) for d in ("cuda", "cpu")}
    assert outputs["cpu"] == outputs["cuda"]
    assert len(outputs["cpu"].splitlines()) == 2


def test_a_gpu_run_stores_tied_weights_once_as_a_cpu_run_does(tmp_path):
    # The shared embeddings and the output projection are one tensor; copied to the CPU name by
    # name, a GPU run's files would hold it three times.
    runs = [
        run_tiny(tmp_path, f"tied-{i}", device=device, precision="fp32")[0]
        for i, device in enumerate(("cpu", "cuda"))
    ]
    for name in ("best.pt", "last.pt"):  # a model file and a training checkpoint
        cpu_size, gpu_size = ((run / name).stat().st_size for run in runs)
        assert gpu_size == pytest.approx(cpu_size, rel=0.02)
        weights = load_checkpoint(runs[1] / name)["model"]
        storages = {t.untyped_storage().data_ptr() for t in weights.values()}
        assert len(storages) == len(weights) - 2  # three names, one tensor


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_training_steps_on_cuda_never_wait_for_the_gpu(tmp_path, precision):
    """torch's sync debug mode raises at any operation that makes the host wait for the GPU
    (.item(), a count of True values, a blocking copy): the steps after the first (which sets
    up the optimizer's state) have none, and their outcomes are read when asked."""
    from tfm.training import StopFlag, optimizer_step
    from tfm.training.data_parallel import DataParallel
    from tfm.training.distributed import Replicas
    from tfm.training.session_opening import open_session

    config = tiny_config(tmp_path / "run", WIDER, device="cuda", precision=precision)
    session = open_session(config, resume=False, overwrite=False)
    assert not session.read_each_step
    parallel = DataParallel(Replicas(), session, StopFlag())
    data = session.epochs.data(0)
    batches = [data.batch(indices) for indices in data.batches[:4]]
    optimizer_step(session, parallel, batches[:1])
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for batch in batches[1:]:
            optimizer_step(session, parallel, [batch])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert session.progress.tokens_seen == 0 and len(session.unread.steps) == 4
    session.read_steps()
    assert session.progress.tokens_seen == sum(b.n_tgt_tokens for b in batches)
    assert session.progress.log_window.steps == 4 and session.progress.nonfinite_total == 0


def test_precision_auto_trains_in_bf16_on_a_gpu_that_computes_in_it(tmp_path):
    from tfm.training.session_opening import open_session

    session = open_session(tiny_config(tmp_path / "run", device="cuda"), resume=False,
                           overwrite=False)  # fmt: skip
    bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    assert session.dtype == (torch.bfloat16 if bf16 else torch.float32)

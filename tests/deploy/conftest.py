"""One toy run trained for the export tests: trained once per test session (about half a
minute on one CPU thread) to where its greedy translations are real sentences, with near-ties
between tokens as rare as in use."""

import pytest
import torch

from tfm.config import load_config
from tfm.data.pipeline import load_texts
from tfm.data.tokenizer import EOS_ID
from tfm.rundir.model_file import load_trained
from tfm.rundir.paths import find_run
from tfm.training import train

N_HELD_OUT = 200


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory):
    """A run directory: d_model 64, 1 + 1 layers, 400 steps on 4,000 toy pairs (validation
    BLEU about 20), the toy test split of 200 held-out sentences."""
    run = tmp_path_factory.mktemp("export") / "run"
    sets = [
        f"run_dir={run}",
        "data.toy.n_train=4000",
        "data.toy.n_validation=20",
        f"data.toy.n_test={N_HELD_OUT}",
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
    return run


@pytest.fixture(scope="session")
def toy_model(toy_run):
    """The trained run loaded for tfm's own decoding."""
    return load_trained(find_run(toy_run), torch.device("cpu"))


@pytest.fixture(scope="session")
def held_out(toy_model):
    """The 200 held-out English sentences and their framed source ids (ids + EOS)."""
    english, _, _ = load_texts(toy_model.config.data, "test")
    return english, [ids + [EOS_ID] for ids in toy_model.tokenizer.encode_src(english)]


@pytest.fixture(scope="session")
def exported(toy_run, tmp_path_factory):
    """The run exported with float32 weights (quantization none)."""
    from tfm.deploy import export_run

    out = tmp_path_factory.mktemp("exported") / "float32"
    export_run(toy_run, out)
    return out

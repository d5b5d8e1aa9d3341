"""The export tests' fixtures: the run they export loaded (`toy_run`, in tests/conftest.py),
its export and its held-out sentences."""

import pytest
import torch

from tfm.data.pipeline import load_texts
from tfm.data.tokenizer import EOS_ID
from tfm.rundir.model_file import load_trained
from tfm.rundir.paths import find_run


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

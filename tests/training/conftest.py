"""The `compile_backend` fixture of the tests that train through torch.compile."""

import functools
import shutil

import pytest
import torch
from torch._dynamo.utils import counters

from tfm.training import data_parallel


@pytest.fixture(
    params=["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)],
)
def compile_backend(request, monkeypatch):
    """torch.compile for the test, with dynamo's compiled code and counts reset before it and its
    code after: through dynamo and AOT autograd with eager kernels by default, through inductor's
    generated C++ with -m slow (20-40 s of C++ compilation each on a machine without inductor's
    cache). Both need a C++ compiler, which tfm asks for before it compiles on a CPU."""
    if not any(shutil.which(c) for c in data_parallel._CXX):
        pytest.skip("torch.compile on a CPU needs a C++ compiler")
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend=request.param))
    torch._dynamo.reset()
    counters.clear()
    yield request.param
    torch._dynamo.reset()

import pytest
import torch
from tiny_models import single_thread


@pytest.fixture
def no_fast_path():
    """Keep PyTorch's reference modules on their plain Python path in eval mode: the fused
    "fast path" would return nested tensors (zeros at padded positions) and test a different
    implementation from the one whose weights we copied."""
    previous = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(previous)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with single_thread():
        yield

import pytest
import torch


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
    """These models are tiny: a second thread buys nothing, and when other processes share the
    two cores, threads waiting on each other make small ops many times slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)

import pytest
from tiny_models import single_thread


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with single_thread():
        yield

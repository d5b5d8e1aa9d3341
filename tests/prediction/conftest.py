"""Fixtures of the tests in this folder: the tiny attention model and its tokenizer, and one
thread for every test (the ensemble comparisons are exact only without threaded reductions)."""

import pytest
from attention_model import model, tokenizer  # noqa: F401
from tiny_models import single_thread


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with single_thread():
        yield

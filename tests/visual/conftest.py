"""Fixtures of the tests in this folder: the tiny attention model and its tokenizer."""

from attention_model import model, tokenizer  # noqa: F401

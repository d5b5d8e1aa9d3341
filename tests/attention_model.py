"""A tiny untrained model and tokenizer whose attention the prediction and picture tests look
at, as module-scoped fixtures (the conftest.py of tests/prediction and tests/visual import
them)."""

import pytest
import torch
from tiny_models import decode_settings

from tfm.config import Config
from tfm.data.tokenizer import Tokenizer, train_tokenizer
from tfm.prediction.attention_weights import AttentionView
from tfm.prediction.torch_translator import TorchTranslator
from tfm.transformer import ModelArgs, Transformer, build_model

SRC = ["the dog sees the cat .", "a man walks home .", "the small cat sleeps ."]
TGT = ["der Hund sieht die Katze .", "ein Mann geht nach Hause .", "die kleine Katze schläft ."]
SENTENCE = "the cat sees the dog ."
MODEL_ARGS = dict(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64,
                  dropout=0.0, max_len=64)  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return train_tokenizer(SRC, TGT, vocab_size=80, min_frequency=1)


@pytest.fixture(scope="module")
def model(tokenizer: Tokenizer) -> Transformer:
    """2+2 layers, 4 heads, d_model 32, seeded: the same weights every time."""
    torch.manual_seed(0)
    return build_model(ModelArgs(**vocab_sizes(tokenizer), **MODEL_ARGS)).eval()


def vocab_sizes(tokenizer: Tokenizer) -> dict:
    return dict(src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size)


def attention_of(
    model: Transformer, tokenizer: Tokenizer, kind: str, decoding: dict | None = None
) -> AttentionView:
    """The `kind` attention weights of SENTENCE, as the model's Translator shows them (the
    decoding keys `decoding`, default the schema's, set its output limit)."""
    translator = TorchTranslator(model=model, tokenizer=tokenizer, config=Config(),
                                 settings=decode_settings(decoding))  # fmt: skip
    assert translator.shows_attention
    return translator.attention_views(SENTENCE)[kind]

"""A random German→English model with a joint tokenizer, as a reranker (shared by the reranking
and likelihood tests)."""

import torch
from tiny_models import decode_settings

from tfm.data.tokenizer import train_tokenizer
from tfm.prediction.reranking import Reranker
from tfm.transformer import ModelArgs, build_model

EN = ["the dog sees the cat", "a man rides a red bike", "two girls play in the snow"]
DE = ["der Hund sieht die Katze", "ein Mann fährt ein rotes Rad", "zwei Mädchen spielen im Schnee"]


def reverse_reranker() -> Reranker:
    """The model untrained (its scores still differ from pair to pair), as a `Reranker` of
    weight 0.5 that decodes in batches of at most 40 tokens."""
    torch.manual_seed(0)
    tokenizer = train_tokenizer(DE, EN, vocab_size=120, min_frequency=1)
    V = tokenizer.src_vocab_size
    model = build_model(ModelArgs(src_vocab_size=V, tgt_vocab_size=V, d_model=16, n_heads=2,
                                  n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0,
                                  share_embeddings=True))  # fmt: skip
    return Reranker(model.eval(), tokenizer, decode_settings({"max_tokens": 40}), weight=0.5)

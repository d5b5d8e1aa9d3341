"""The answer of POST /attention: one sentence's greedy translation and every kind of its
attention weights (`tfm.prediction.attention_weights`), as the page draws them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfm.prediction.settings import DecodeSettings


def attention_task(trained: Any, settings: DecodeSettings, sentence: str) -> Callable[[], dict]:
    """The work of the answer, for the model worker to run: weights as [layer][head][query][key],
    rounded to 4 decimals."""

    def task() -> dict:
        from tfm.prediction.attention_weights import attention_views

        views = attention_views(
            trained.model,
            trained.tokenizer,
            sentence,
            max_len_a=settings.max_len_a,
            max_len_b=settings.max_len_b,
        )
        cross, encoder, decoder = views["cross"], views["encoder"], views["decoder"]
        weights = {
            kind: view.weights.double().round(decimals=4).tolist() for kind, view in views.items()
        }
        return {
            "source": cross.source,
            "translation": cross.translation,
            "source_tokens": encoder.key_tokens,
            "output_tokens": cross.query_tokens,
            "decoder_tokens": decoder.query_tokens,
            "layers": cross.n_layers,
            "heads": cross.n_heads,
            **weights,
        }

    return task

"""The answer of POST /attention: one sentence's greedy translation and every kind of its
attention weights (`Translator.attention_views`), as the page draws them."""

from __future__ import annotations

from collections.abc import Callable

from tfm.prediction.translator import Translator


def attention_task(translator: Translator, sentence: str, source: list[int]) -> Callable[[], dict]:
    """The work of the answer, for the model worker to run, from the sentence's ids as the
    request was counted (`source`, with </s>): weights as [layer][head][query][key], rounded to
    4 decimals."""

    def task() -> dict:
        views = translator.attention_views(sentence, source)
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

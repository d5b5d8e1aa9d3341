"""Batched decoding of many sentences with a torch model, by a strategy, in input order: what
the torch `Translator` searches with.

Sources are batched by length (`inference_batches`) and put back in input order, so a file of a
thousand sentences takes seconds. The strategy (`tfm.prediction.strategies`) runs the search of
`tfm.transformer` on each batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from tfm.data.batching import inference_batches, pad
from tfm.data.tokenizer import EOS_ID, PAD_ID
from tfm.device import autocast
from tfm.prediction.ensemble import Model
from tfm.prediction.settings import DecodeSettings
from tfm.transformer import Hypothesis

log = logging.getLogger(__name__)

MAX_NAMED = 10  # line numbers a warning names before it only counts the rest


def search_ids(
    model: Model,
    sources: Sequence[Sequence[int]],
    settings: DecodeSettings,
    *,
    n_best: int = 1,
    numbers: Sequence[int] | None = None,
) -> list[list[Hypothesis]]:
    """Decode framed sources (ids + EOS) with `settings.strategy`: per source, in input order,
    the hypotheses it finds when `n_best` are wanted, best first. `numbers` are the sources'
    line numbers, named in the warning about over-long sources (default: 1, 2, ...). Sources
    longer than the positional table are cut to fit it."""
    model.eval()
    limit = model.max_len  # the positional table; decoding caps its output at it too
    clipped = [list(s[: limit - 1]) + [EOS_ID] if len(s) > limit else list(s) for s in sources]
    if long := [i for i, s in enumerate(sources) if len(s) > limit]:
        named = [str(numbers[i] if numbers is not None else i + 1) for i in long]
        more = f" and {len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else ""
        log.warning("line(s) %s%s: longer than %d tokens, cut to fit the model",
                    ", ".join(named[:MAX_NAMED]), more, limit)  # fmt: skip
    device, strategy = settings.torch_device(), settings.strategy
    search = strategy.searcher(device)  # one random stream for the whole call
    outputs: list = [None] * len(sources)
    budget = settings.batch_source_tokens(n_best)
    for indices in inference_batches([len(s) for s in clipped], max_tokens=budget):
        src = pad([clipped[i] for i in indices], PAD_ID).to(device)  # (B, S)
        with autocast(device, settings.torch_dtype()):
            found = search(model, src, settings.limit, n_best)
        for i, output in zip(indices, found, strict=True):
            outputs[i] = output
    return outputs

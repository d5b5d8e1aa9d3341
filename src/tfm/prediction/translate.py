"""Batched decoding of many sentences: greedy or beam search, n-best lists, in input order.

Sources are batched by length (`inference_batches`) and put back in input order, so a file of a
thousand sentences takes seconds. The search itself lives in `tfm.transformer.decoding`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch

from tfm.data.batching import inference_batches, pad
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from tfm.device import autocast
from tfm.prediction.ensemble import Model
from tfm.prediction.settings import DecodeSettings
from tfm.transformer import Hypothesis, beam_search, greedy_decode

log = logging.getLogger(__name__)

MAX_NAMED = 10  # line numbers a warning names before it only counts the rest


def translate_ids(
    model: Model,
    sources: Sequence[Sequence[int]],
    settings: DecodeSettings,
    *,
    numbers: Sequence[int] | None = None,
) -> list[list[int]]:
    """Decode framed sources (ids + EOS), greedy or beam; returns output ids in input order.
    `numbers` are the sources' line numbers, named in the warning about over-long sources
    (default: 1, 2, ...)."""
    if settings.beam_size > 1:
        found = translate_nbest_ids(model, sources, settings, 1, numbers=numbers)
        return [best[0].tokens for best in found]

    def greedy(src: torch.Tensor, limits: dict) -> list[list[int]]:
        return greedy_decode(model, src, **limits).tokens

    return _in_batches(model, sources, settings, numbers, greedy)


def translate_nbest_ids(
    model: Model,
    sources: Sequence[Sequence[int]],
    settings: DecodeSettings,
    n_best: int,
    *,
    numbers: Sequence[int] | None = None,
) -> list[list[Hypothesis]]:
    """The `n_best` beam search hypotheses (<= settings.beam_size) of each framed source, best
    first, in input order; beam size 1 gives greedy's output with its score."""

    def beam(src: torch.Tensor, limits: dict) -> list[list[Hypothesis]]:
        size, alpha = settings.beam_size, settings.length_penalty
        return beam_search(model, src, beam_size=size, length_penalty=alpha, n_best=n_best,
                           **limits)  # fmt: skip

    return _in_batches(model, sources, settings, numbers, beam)


def _in_batches(
    model: Model,
    sources: Sequence[Sequence[int]],
    settings: DecodeSettings,
    numbers: Sequence[int] | None,
    search: Callable[[torch.Tensor, dict], list],
) -> list:
    """`search(padded sources on the device, decoding limits)`'s output for each source, in
    input order, searched in batches of similar length. Sources longer than the positional
    table are cut to fit it, with a warning that names their line numbers."""
    model.eval()
    limit = model.max_len  # the positional table; decoding caps its output at it too
    clipped = [list(s[: limit - 1]) + [EOS_ID] if len(s) > limit else list(s) for s in sources]
    if long := [i for i, s in enumerate(sources) if len(s) > limit]:
        named = [str(numbers[i] if numbers is not None else i + 1) for i in long]
        more = f" and {len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else ""
        log.warning("line(s) %s%s: longer than %d tokens, cut to fit the model",
                    ", ".join(named[:MAX_NAMED]), more, limit)  # fmt: skip
    limits: dict[str, float] = {"bos_id": BOS_ID, "eos_id": EOS_ID}
    limits.update(max_len_a=settings.max_len_a, max_len_b=settings.max_len_b)
    # A beam multiplies the batch by beam_size; keep the decoding batch's size the same.
    budget = max(settings.max_tokens // settings.beam_size, 1)
    outputs: list = [None] * len(sources)
    for indices in inference_batches([len(s) for s in clipped], max_tokens=budget):
        src = pad([clipped[i] for i in indices], PAD_ID).to(settings.torch_device())  # (B, S)
        with autocast(settings.torch_device(), settings.torch_dtype()):
            found = search(src, limits)
        for i, output in zip(indices, found, strict=True):
            outputs[i] = output
    return outputs


def split_nbest(
    model: Model,
    tokenizer: Tokenizer,
    split: EncodedSplit,
    settings: DecodeSettings,
    *,
    numbers: Sequence[int] | None = None,
) -> list[list[tuple[str, float]]]:
    """The whole beam (`settings.beam_size` hypotheses) of each source of a split, as (text,
    score) pairs, best first; `numbers` as in `translate_ids`."""
    found = translate_nbest_ids(model, split.src, settings, settings.beam_size, numbers=numbers)
    texts = iter(tokenizer.decode_tgt([h.tokens for beam in found for h in beam]))
    return [[(next(texts), h.score) for h in beam] for beam in found]

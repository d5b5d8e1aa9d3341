"""Search: turning a trained model into output token ids. Functions that take a model; the model
does not know how it is decoded.

§3.1 makes the decoder auto-regressive; §6.1 decodes with beam search (beam size 4, length
penalty alpha = 0.6), a maximum output length of "input length + 50", and stops early when
possible. `greedy_decode` takes the most likely token at each step, `sample_decode` draws it
(not in the paper: what back-translation and data augmentation use); `tfm.transformer.beam`
keeps the best few prefixes. Each decodes any `Decodable`: a `Transformer`, or anything else
with its encode / cache / step interface (say, several models decoding as one). The special ids
and the length limit are the caller's: `bos_id`, `eos_id`, and a `LengthLimit` that gives each
sentence's most output tokens from its source length.

Deviation from §6.1: the length limit is the caller's rule per sentence (tfm's is
`a * source_length + b`, `tfm.prediction.settings.OutputLimit`), capped by the model's
positional table.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import torch
from torch import Tensor

from tfm.transformer.model import DecodeStep


class SearchCache(Protocol):
    """A model's decoding state for a batch of rows (sentences, or beams of sentences)."""

    def select(self, index: Tensor) -> "SearchCache":
        """Keep the rows `index` (N,) long, in that order."""
        ...

    def reorder_beams(self, index: Tensor) -> "SearchCache":
        """Like `select`, for an `index` that maps each row to a row of the same sentence."""
        ...


class Decodable(Protocol):
    """What search needs of a model: `pad_id`, `max_len` (the longest source or target it reads),
    `encode` once per batch, a cache from `start_cache`, then `decode_step` for each new token
    (shapes as in `Transformer`)."""

    pad_id: int

    @property
    def max_len(self) -> int: ...

    def encode(self, src_ids: Tensor) -> Any: ...

    def start_cache(self, memory: Any, src_ids: Tensor, *, capacity: int = 64) -> SearchCache: ...

    def decode_step(
        self, tgt_ids: Tensor, cache: Any, *, need_weights: bool = False
    ) -> DecodeStep: ...


class LengthLimit(Protocol):
    """The rule for a sentence's output length: the most tokens to generate (EOS included) for a
    source of `source_length` real tokens, for a model whose positional table is `max_len`."""

    def tokens(self, source_length: int, max_len: int) -> int: ...


@dataclass(frozen=True)
class DecodeResult:
    """tokens: per sentence, the generated ids without BOS and without the EOS.
    scores: per sentence, log P(tokens | source), EOS included when the sentence ended with it.
    cross_attention: None, or per sentence a tensor (L, H, T_out, S_real) of the decoder's
    cross-attention weights, L = decoder layers, T_out = len(tokens) (row j is the query that
    produced tokens[j]), S_real = the source's non-pad positions."""

    tokens: list[list[int]]
    scores: list[float]
    cross_attention: list[Tensor] | None = None


class Hypothesis(NamedTuple):
    """One output of a search: ids without BOS and EOS, and its score."""

    tokens: list[int]
    score: float


def output_limits(model: Decodable, src_ids: Tensor, limit: LengthLimit) -> Tensor:
    """Per sentence of src_ids (B, S), the most tokens to generate (EOS included) by `limit`
    for its real (non-pad) length, at least 1 and at most the model's positional table.
    Returns (B,) long."""
    src_len = (src_ids != model.pad_id).sum(dim=1).tolist()  # (B,)
    found = [min(max(limit.tokens(n, model.max_len), 1), model.max_len) for n in src_len]
    return torch.tensor(found, dtype=torch.long, device=src_ids.device)


Pick = Callable[[Tensor], Tensor]  # next-token logits (N, V) -> the chosen ids (N,)


@torch.inference_mode()
def greedy_decode(
    model: Decodable,
    src_ids: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    limit: LengthLimit,
    return_attention: bool = False,
) -> DecodeResult:
    """Batched greedy decoding of src_ids (B, S): the most likely token at each step. Call
    `model.eval()` first: dropout stays on in training mode."""

    def best(logits: Tensor) -> Tensor:
        return logits.argmax(dim=-1)  # (N,)

    return _token_by_token(model, src_ids, best, bos_id=bos_id, eos_id=eos_id, limit=limit,
                           return_attention=return_attention)  # fmt: skip


@torch.inference_mode()
def sample_decode(
    model: Decodable,
    src_ids: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    limit: LengthLimit,
    samples: int,
    temperature: float,
    top_k: int,
    top_p: float,
    generator: torch.Generator,
) -> list[list[Hypothesis]]:
    """`samples` outputs of each source of src_ids (B, S), each token drawn from the model's
    distribution as `sampling_weights` reshapes it, with `generator`'s random stream; per source,
    its samples best first, scored by their log-probability under the model itself (temperature
    1, nothing cut off). Call `model.eval()` first."""
    if samples < 1:
        raise ValueError(f"samples={samples} must be at least 1")

    def draw(logits: Tensor) -> Tensor:
        weights = sampling_weights(logits, temperature=temperature, top_k=top_k, top_p=top_p)
        return torch.multinomial(weights, 1, generator=generator).squeeze(1)  # (N,)

    rows = torch.arange(src_ids.size(0), device=src_ids.device).repeat_interleave(samples)
    found = _token_by_token(model, src_ids, draw, bos_id=bos_id, eos_id=eos_id, limit=limit,
                            rows=rows)  # fmt: skip
    drawn = [Hypothesis(t, s) for t, s in zip(found.tokens, found.scores, strict=True)]
    return [sorted(drawn[i : i + samples], key=lambda h: -h.score)
            for i in range(0, len(drawn), samples)]  # fmt: skip


def sampling_weights(logits: Tensor, *, temperature: float, top_k: int, top_p: float) -> Tensor:
    """The distribution tokens are drawn from, (N, V) logits -> (N, V) unnormalised weights: the
    model's log-probabilities divided by `temperature` (below 1 sharper, above 1 flatter), then,
    as CTranslate2 does it, only the `top_k` most likely tokens (0: all) and, of those, only the
    fewest most likely whose probability adds up to `top_p` (nucleus sampling, Holtzman et al.,
    2020; 1: all)."""
    if not temperature > 0 or top_k < 0 or not 0 < top_p <= 1:
        raise ValueError(f"need temperature > 0, top_k >= 0, 0 < top_p <= 1, got "
                         f"{temperature=}, {top_k=}, {top_p=}")  # fmt: skip
    scaled = logits.float().log_softmax(dim=-1) / temperature  # (N, V)
    if 0 < top_k < scaled.size(-1):
        kth = scaled.topk(top_k, dim=-1).values[:, -1:]  # (N, 1)
        scaled = scaled.masked_fill(scaled < kth, -math.inf)
    weights = scaled.softmax(dim=-1)  # (N, V)
    if top_p < 1:
        ranked, order = weights.sort(dim=-1, descending=True)  # (N, V)
        beyond = ranked.cumsum(dim=-1) - ranked >= top_p  # the tokens before already reach p
        weights = weights.scatter(1, order, ranked.masked_fill(beyond, 0.0))
    return weights


def _token_by_token(
    model: Decodable,
    src_ids: Tensor,
    pick: Pick,
    *,
    bos_id: int,
    eos_id: int,
    limit: LengthLimit,
    rows: Tensor | None = None,
    return_attention: bool = False,
) -> DecodeResult:
    """One output per row, a row being a source of src_ids (B, S) (`rows`: the source of each
    row (N,), default one row per source), each next token chosen by `pick`, with a key/value
    cache: each step feeds only the newest token; self-attention keys and values are appended
    step by step, cross-attention keys and values are computed once per source. Each row stops
    at its EOS or its length limit, and leaves the batch then."""
    src_real = src_ids != model.pad_id  # (B, S)
    limits = output_limits(model, src_ids, limit)  # (B,)
    cache = model.start_cache(model.encode(src_ids), src_ids, capacity=int(limits.max()))
    if rows is not None:
        cache, limits, src_real = cache.select(rows), limits[rows], src_real[rows]  # (N, ...)
    N = limits.size(0)
    active = torch.arange(N, device=src_ids.device)  # original index of each unfinished row
    prefix = src_ids.new_full((N, 1), bos_id)  # (N, 1 + t)
    totals = torch.zeros(N, device=src_ids.device)  # (N,) summed log-probabilities
    tokens: list[list[int]] = [[] for _ in range(N)]
    scores: list[float] = [0.0] * N
    weights_of: list[list[Tensor]] = [[] for _ in range(N)]  # per row, per step (L, H, S)
    step = 0
    while active.numel() > 0:
        out = model.decode_step(prefix[:, -1:], cache, need_weights=return_attention)
        next_ids = pick(out.logits)  # (n,)
        log_probs = out.logits.float().log_softmax(dim=-1)  # (n, V)
        totals = totals + log_probs.gather(1, next_ids[:, None]).squeeze(1)
        prefix = torch.cat([prefix, next_ids[:, None]], dim=1)  # (n, 2 + t)
        cache, step = out.cache, step + 1
        if return_attention:
            weights = torch.stack(out.cross_weights, dim=1)[:, :, :, -1]  # (n, L, H, S)
            for row, sentence in enumerate(active.tolist()):
                weights_of[sentence].append(weights[row])
        done = (next_ids == eos_id) | (limits[active] <= step)  # (n,)
        if not bool(done.any()):
            continue
        for row in done.nonzero().flatten().tolist():
            ids, sentence = prefix[row, 1:].tolist(), int(active[row])
            tokens[sentence] = ids[:-1] if ids[-1] == eos_id else ids
            scores[sentence] = float(totals[row])
        keep = (~done).nonzero().flatten()  # finished rows leave the batch
        active, prefix, totals = active[keep], prefix[keep], totals[keep]
        cache = cache.select(keep)
    if not return_attention:
        return DecodeResult(tokens, scores)
    attention = [
        torch.stack(weights_of[i], dim=2)[:, :, : len(tokens[i]), src_real[i]]  # (L, H, T, S)
        for i in range(N)
    ]
    return DecodeResult(tokens, scores, attention)

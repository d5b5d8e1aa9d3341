"""Search: turning a trained model into output token ids. Functions that take a model; the model
does not know how it is decoded.

§3.1 makes the decoder auto-regressive; §6.1 decodes with beam search (beam size 4, length
penalty alpha = 0.6), a maximum output length of "input length + 50", and stops early when
possible. `greedy_decode` is beam search with a beam of one. Both decode any `Decodable`: a
`Transformer`, or anything else with its encode / cache / step interface (say, several models
decoding as one).

Deviation from §6.1: the length limit is `a * source_length + b` (source length without
padding; a = 1, b = 50 gives the paper's), capped by the model's positional table.
"""

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


@dataclass(frozen=True)
class DecodeResult:
    """tokens: per sentence, the generated ids without BOS and without the EOS.
    cross_attention: None, or per sentence a tensor (L, H, T_out, S_real) of the decoder's
    cross-attention weights, L = decoder layers, T_out = len(tokens) (row j is the query that
    produced tokens[j]), S_real = the source's non-pad positions."""

    tokens: list[list[int]]
    cross_attention: list[Tensor] | None = None


def output_limits(model: Decodable, src_ids: Tensor, max_len_a: float, max_len_b: float) -> Tensor:
    """Per sentence, the most tokens (EOS included) to generate: floor(a * S_real + b), at least 1
    and at most the model's positional table. Returns (B,) long."""
    if max_len_a < 0:
        raise ValueError(f"max_len_a={max_len_a} must not be negative")
    src_len = (src_ids != model.pad_id).sum(dim=1)  # (B,)
    limits = torch.floor(max_len_a * src_len.double() + max_len_b).long()
    return limits.clamp(min=1, max=model.max_len)


@torch.inference_mode()
def greedy_decode(
    model: Decodable,
    src_ids: Tensor,
    *,
    bos_id: int = 1,
    eos_id: int = 2,
    max_len_a: float = 1.5,
    max_len_b: float = 10,
    return_attention: bool = False,
) -> DecodeResult:
    """Batched greedy decoding of src_ids (B, S) with a key/value cache: each step feeds only the
    newest token; self-attention keys and values are appended step by step, cross-attention keys
    and values are computed once. Each sentence stops at its EOS or its length limit, and leaves
    the batch then. Call `model.eval()` first: dropout stays on in training mode."""
    B, limits = src_ids.size(0), output_limits(model, src_ids, max_len_a, max_len_b)  # (B,)
    src_real = src_ids != model.pad_id  # (B, S)
    cache = model.start_cache(model.encode(src_ids), src_ids, capacity=int(limits.max()))
    active = torch.arange(B, device=src_ids.device)  # original index of each unfinished sentence
    prefix = src_ids.new_full((B, 1), bos_id)  # (B, 1 + t)
    tokens: list[list[int]] = [[] for _ in range(B)]
    rows: list[list[Tensor]] = [[] for _ in range(B)]  # per sentence, per step (L, H, S)
    step = 0
    while active.numel() > 0:
        out = model.decode_step(prefix[:, -1:], cache, need_weights=return_attention)
        next_ids = out.logits.argmax(dim=-1)  # (B,)
        prefix = torch.cat([prefix, next_ids[:, None]], dim=1)  # (B, 2 + t)
        cache, step = out.cache, step + 1
        if return_attention:
            weights = torch.stack(out.cross_weights, dim=1)[:, :, :, -1]  # (B, L, H, S)
            for row, sentence in enumerate(active.tolist()):
                rows[sentence].append(weights[row])
        done = (next_ids == eos_id) | (limits[active] <= step)  # (B,)
        if not bool(done.any()):
            continue
        for row in done.nonzero().flatten().tolist():
            ids = prefix[row, 1:].tolist()
            tokens[int(active[row])] = ids[:-1] if ids[-1] == eos_id else ids
        keep = (~done).nonzero().flatten()  # finished sentences leave the batch
        active, prefix, cache = active[keep], prefix[keep], cache.select(keep)
    if not return_attention:
        return DecodeResult(tokens)
    attention = [
        torch.stack(rows[i], dim=2)[:, :, : len(tokens[i]), src_real[i]]  # (L, H, T_out, S_real)
        for i in range(B)
    ]
    return DecodeResult(tokens, attention)


class Hypothesis(NamedTuple):
    """One finished beam: ids without BOS and EOS, and its length-normalised score."""

    tokens: list[int]
    score: float


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """GNMT's lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al., 2016, eq. 14); |Y| counts the
    generated tokens, EOS included. A hypothesis scores log P(Y | X) / lp(Y)."""
    return ((5 + length) / 6) ** alpha


@torch.inference_mode()
def beam_search(
    model: Decodable,
    src_ids: Tensor,
    *,
    bos_id: int = 1,
    eos_id: int = 2,
    beam_size: int = 5,
    length_penalty: float = 0.6,
    max_len_a: float = 1.5,
    max_len_b: float = 10,
    n_best: int = 1,
) -> list[list[Hypothesis]]:
    """§6.1 beam search over src_ids (B, S), batched over sentences and beams, with the
    key/value cache reordered as beams are picked. Per sentence, the `n_best` hypotheses, best
    first; a score is log P(Y | X) / `gnmt_length_penalty`(|Y|, alpha = `length_penalty`).

    Each step extends every live beam by every token and keeps the 2 * beam_size best candidates:
    those ending in EOS among the best beam_size are finished, and the best beam_size others live
    on. A sentence ends once it has beam_size finished hypotheses or reaches its length limit
    (its live beams are then finished as they are). Call `model.eval()` first.
    """
    if beam_size < 1 or not 1 <= n_best <= beam_size:
        raise ValueError(
            f"need beam_size >= 1 and 1 <= n_best <= beam_size, got {beam_size=}, {n_best=}"
        )
    K, limits = beam_size, output_limits(model, src_ids, max_len_a, max_len_b)  # (B,)
    device, B = src_ids.device, src_ids.size(0)
    rows = torch.arange(B, device=device).repeat_interleave(K)  # (B * K,): K rows per sentence
    # Cross-attention keys and values once per sentence, then copied to its K rows.
    cache = model.start_cache(model.encode(src_ids), src_ids, capacity=int(limits.max()))
    cache = cache.select(rows)
    beams = src_ids.new_full((B * K, 1), bos_id)  # (n * K, 1 + t): BOS and tokens so far
    scores = torch.full((B, K), float("-inf"), device=device)  # (n, K) summed log-probabilities
    scores[:, 0] = 0.0  # one live beam to start with, not K copies of it
    active = torch.arange(B, device=device)  # the sentences still searching
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    step = 0
    while active.numel() > 0:
        out = model.decode_step(beams[:, -1:], cache)
        step += 1
        top_scores, top_rows, top_tokens = _best_candidates(scores, out.logits, K)  # (n, 2K)
        is_eos = top_tokens == eos_id
        ended = is_eos & top_scores.isfinite()
        ended[:, K:] = False  # an EOS outside the best K does not finish a hypothesis
        for i, j in ended.nonzero().tolist():
            _finish(finished[int(active[i])], beams[top_rows[i, j]], top_scores[i, j], step,
                    length_penalty)  # fmt: skip
        live = ~is_eos & ((~is_eos).cumsum(dim=1) <= K)  # the best K that do not end
        pick = live.nonzero()[:, 1].view(-1, K)  # (n, K)
        scores = top_scores.gather(1, pick)  # (n, K)
        next_rows = top_rows.gather(1, pick).flatten()  # (n * K,)
        beams = torch.cat([beams[next_rows], top_tokens.gather(1, pick).view(-1, 1)], dim=1)
        cache = out.cache.reorder_beams(next_rows)
        at_limit = limits[active] <= step  # (n,)
        for i in at_limit.nonzero().flatten().tolist():
            for k in range(K):
                _finish(finished[int(active[i])], beams[i * K + k], scores[i, k], step,
                        length_penalty)  # fmt: skip
        counts = torch.tensor([len(finished[i]) for i in active.tolist()], device=device)
        keep = (~(at_limit | (counts >= K))).nonzero().flatten()  # (n',) sentences going on
        if keep.numel() < active.numel():
            keep_rows = (keep[:, None] * K + torch.arange(K, device=device)).flatten()
            active, scores, beams = active[keep], scores[keep], beams[keep_rows]
            cache = cache.select(keep_rows)
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:n_best] for hyps in finished]


def _best_candidates(scores: Tensor, logits: Tensor, K: int) -> tuple[Tensor, Tensor, Tensor]:
    """Running scores (n, K) and next-token logits (n * K, V) -> the 2K best extensions per
    sentence: their summed log-probabilities, the rows (of n * K) they extend, their tokens."""
    n = scores.size(0)
    log_probs = logits.float().log_softmax(dim=-1)  # (n * K, V)
    V = log_probs.size(-1)
    candidates = (scores[:, :, None] + log_probs.view(n, K, V)).view(n, K * V)
    top_scores, top_index = candidates.topk(min(2 * K, K * V), dim=1)  # (n, 2K)
    top_rows = torch.arange(n, device=scores.device)[:, None] * K + top_index // V  # (n, 2K)
    return top_scores, top_rows, top_index % V


def _finish(
    hypotheses: list[Hypothesis], beam: Tensor, score: Tensor, length: int, alpha: float
) -> None:
    """Add `beam` (BOS and tokens, without the EOS if it ended with one) to `hypotheses`, with
    its summed log-probability `score` over `length` generated tokens, normalised."""
    if bool(score.isfinite()):
        tokens = beam[1:].tolist()
        hypotheses.append(Hypothesis(tokens, float(score) / gnmt_length_penalty(length, alpha)))

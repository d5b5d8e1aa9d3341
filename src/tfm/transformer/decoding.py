"""Search: turning a trained model into output token ids. Functions that take a model; the model
does not know how it is decoded.

§3.1 makes the decoder auto-regressive; §6.1 decodes with a maximum output length of
"input length + 50" and stops early when possible. Here the limit is `a * source_length + b`
(source length without padding), capped by the model's positional table.

Deviation from §6.1: greedy decoding (beam search with a beam of 1) is what `greedy_decode` does;
the paper uses beam search with beam size 4 and length penalty alpha = 0.6 (see `beam_search`).
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from tfm.transformer.model import Transformer


@dataclass(frozen=True)
class DecodeResult:
    """tokens: per sentence, the generated ids without BOS and without the EOS.
    cross_attention: None, or per sentence a tensor (L, H, T_out, S_real) of the decoder's
    cross-attention weights, L = decoder layers, T_out = len(tokens) (row j is the query that
    produced tokens[j]), S_real = the source's non-pad positions."""

    tokens: list[list[int]]
    cross_attention: list[Tensor] | None = None


def output_limits(
    model: Transformer, src_ids: Tensor, max_len_a: float, max_len_b: float
) -> Tensor:
    """Per sentence, the most tokens (EOS included) to generate: floor(a * S_real + b), at least 1
    and at most the model's positional table. Returns (B,) long."""
    if max_len_a < 0:
        raise ValueError(f"max_len_a={max_len_a} must not be negative")
    src_len = (src_ids != model.pad_id).sum(dim=1)  # (B,)
    limits = torch.floor(max_len_a * src_len.double() + max_len_b).long()
    return limits.clamp(min=1, max=model.max_len)


@torch.inference_mode()
def greedy_decode(
    model: Transformer,
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
    return _greedy(
        model, src_ids, bos_id, eos_id, output_limits(model, src_ids, max_len_a, max_len_b),
        use_cache=True, return_attention=return_attention,
    )  # fmt: skip


@torch.inference_mode()
def greedy_decode_uncached(
    model: Transformer,
    src_ids: Tensor,
    *,
    bos_id: int = 1,
    eos_id: int = 2,
    max_len_a: float = 1.5,
    max_len_b: float = 10,
) -> DecodeResult:
    """The reference for `greedy_decode`: the same search, but each step re-runs the decoder over
    the whole prefix (and recomputes cross-attention keys and values). For tests and benchmarks."""
    return _greedy(
        model, src_ids, bos_id, eos_id, output_limits(model, src_ids, max_len_a, max_len_b),
        use_cache=False, return_attention=False,
    )  # fmt: skip


def _greedy(
    model: Transformer,
    src_ids: Tensor,
    bos_id: int,
    eos_id: int,
    limits: Tensor,
    *,
    use_cache: bool,
    return_attention: bool,
) -> DecodeResult:
    B = src_ids.size(0)
    src_real = src_ids != model.pad_id  # (B, S)
    memory = model.encode(src_ids)  # (B, S, D)
    capacity = int(limits.max())
    cache = model.start_cache(memory, src_ids, capacity=capacity) if use_cache else None
    active = torch.arange(B, device=src_ids.device)  # original index of each unfinished sentence
    prefix = src_ids.new_full((B, 1), bos_id)  # (B, 1 + t)
    tokens: list[list[int]] = [[] for _ in range(B)]
    rows: list[list[Tensor]] = [[] for _ in range(B)]  # per sentence, per step (L, H, S)
    step = 0
    while active.numel() > 0:
        if cache is not None:
            out = model.decode_step(prefix[:, -1:], cache, need_weights=return_attention)
            logits, cache = out.logits, out.cache  # (B, V)
        else:
            logits = model.decode(prefix, memory, src_ids, last_only=True)[:, -1]  # (B, V)
        next_ids = logits.argmax(dim=-1)  # (B,)
        prefix = torch.cat([prefix, next_ids[:, None]], dim=1)  # (B, 2 + t)
        step += 1
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
        active, prefix, src_ids = active[keep], prefix[keep], src_ids[keep]
        if cache is not None:
            cache = cache.select(keep)
        else:
            memory = memory[keep]
    if not return_attention:
        return DecodeResult(tokens)
    attention = [
        torch.stack(rows[i], dim=2)[:, :, : len(tokens[i]), src_real[i]]  # (L, H, T_out, S_real)
        for i in range(B)
    ]
    return DecodeResult(tokens, attention)

"""The naive decoding the decoding benchmarks measure tfm against: greedy search that re-runs the
decoder over the whole prefix at every step (no key/value cache), through the model's public
`encode` and `decode` only."""

import torch
from torch import Tensor

from tfm.api import Transformer


@torch.inference_mode()
def naive_greedy(
    model: Transformer, src_ids: Tensor, *, bos_id: int, eos_id: int, limit: int
) -> list[list[int]]:
    """Per sentence of src_ids (B, S), the greedy ids without BOS and EOS, at most `limit` of them
    (EOS included). The batch stays whole until every sentence has ended; only the last
    position's logits are projected at each step, as tfm's cached decoding does."""
    memory = model.encode(src_ids)  # (B, S, D)
    prefix = src_ids.new_full((src_ids.size(0), 1), bos_id)  # (B, 1 + t)
    for _ in range(limit):
        last = torch.zeros_like(prefix, dtype=torch.bool)
        last[:, -1] = True  # (B, 1 + t): project the newest position only
        next_ids = model.decode(prefix, memory, src_ids, keep=last).argmax(dim=-1)  # (B,)
        prefix = torch.cat([prefix, next_ids[:, None]], dim=1)  # (B, 2 + t)
        if bool((prefix[:, 1:] == eos_id).any(dim=1).all()):
            break
    return [ids[: ids.index(eos_id)] if eos_id in ids else ids for ids in prefix[:, 1:].tolist()]

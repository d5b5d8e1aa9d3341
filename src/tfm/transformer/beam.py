"""Beam search (§6.1): the best few prefixes of each sentence kept at each step, batched over
sentences and beams, scored with GNMT's length penalty (§6.1 uses alpha = 0.6)."""

import torch
from torch import Tensor

from tfm.transformer.decoding import Decodable, Hypothesis, LengthLimit, output_limits


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """GNMT's lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al., 2016, eq. 14); |Y| counts the
    generated tokens, EOS included. A hypothesis scores log P(Y | X) / lp(Y)."""
    return ((5 + length) / 6) ** alpha


@torch.inference_mode()
def beam_search(
    model: Decodable,
    src_ids: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    limit: LengthLimit,
    beam_size: int,
    length_penalty: float,
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
    K, limits = beam_size, output_limits(model, src_ids, limit)  # (B,)
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

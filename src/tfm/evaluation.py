"""Decode a split and score it: sacreBLEU (cased and lowercased), chrF, loss, exact match.

Decoding is batched by source length (`inference_batches`) and put back in input order, so a file of
a thousand sentences takes seconds. The search itself lives in `tfm.transformer` (the model does not
know how it is decoded; this module does not know how it was trained).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import sacrebleu
import torch

from tfm.config import DecodingConfig
from tfm.data.batching import collate, inference_batches, pad
from tfm.data.pipeline import EncodedSplit
from tfm.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from tfm.device import autocast
from tfm.prediction import Ensemble
from tfm.transformer import Hypothesis, Transformer, beam_search, greedy_decode

log = logging.getLogger(__name__)

Model = Transformer | Ensemble  # one trained model, or several decoding as one
# sources, their n-best lists of (text, score) -> the lists re-sorted (tfm.reranking)
Rerank = Callable[[Sequence[str], list[list[tuple[str, float]]]], list[list[tuple[str, float]]]]


@dataclass(frozen=True)
class DecodeSettings:
    """How to decode: output limit a·S + b, batch size in source tokens, device and precision."""

    max_len_a: float = 1.5
    max_len_b: int = 10
    max_tokens: int = 8000
    device: torch.device = torch.device("cpu")
    dtype: torch.dtype = torch.float32
    beam_size: int = 1  # 1: greedy search
    length_penalty: float = 0.6  # GNMT alpha, for beam search

    @classmethod
    def from_config(
        cls,
        config: DecodingConfig,
        device: torch.device,
        dtype: torch.dtype,
        *,
        beam_size: int | None = None,
        length_penalty: float | None = None,
    ) -> DecodeSettings:
        """The config's settings; `beam_size` and `length_penalty` override it when given."""
        return cls(
            config.max_len_a,
            config.max_len_b,
            config.max_tokens,
            device,
            dtype,
            beam_size=beam_size or config.beam_size,
            length_penalty=config.length_penalty if length_penalty is None else length_penalty,
        )


def translate_ids(
    model: Model, sources: Sequence[Sequence[int]], settings: DecodeSettings
) -> list[list[int]]:
    """Decode framed sources (ids + EOS), greedy or beam; returns output ids in input order."""
    if settings.beam_size > 1:
        return [best[0].tokens for best in translate_nbest_ids(model, sources, settings, 1)]
    outputs: list[list[int]] = [[] for _ in sources]
    for indices, src, limits in _source_batches(model, sources, settings):
        with autocast(settings.device, settings.dtype):
            tokens = greedy_decode(model, src, **limits).tokens
        for i, ids in zip(indices, tokens, strict=True):
            outputs[i] = ids
    return outputs


def translate_nbest_ids(
    model: Model, sources: Sequence[Sequence[int]], settings: DecodeSettings, n_best: int
) -> list[list[Hypothesis]]:
    """The `n_best` beam search hypotheses (<= settings.beam_size) of each framed source, best
    first, in input order; beam size 1 gives greedy's output with its score."""
    outputs: list[list[Hypothesis]] = [[] for _ in sources]
    for indices, src, limits in _source_batches(model, sources, settings):
        with autocast(settings.device, settings.dtype):
            found = beam_search(
                model,
                src,
                beam_size=settings.beam_size,
                length_penalty=settings.length_penalty,
                n_best=n_best,
                **limits,
            )
        for i, hypotheses in zip(indices, found, strict=True):
            outputs[i] = hypotheses
    return outputs


def _source_batches(
    model: Model, sources: Sequence[Sequence[int]], settings: DecodeSettings
) -> Iterator[tuple[list[int], torch.Tensor, dict]]:
    """(indices, padded sources on the device, decoding limits) per batch, sorted by length;
    sources longer than the positional table are cut to fit it, with a warning."""
    model.eval()
    limit = model.max_len  # the positional table; decoding caps its output at it too
    clipped = [list(s[: limit - 1]) + [EOS_ID] if len(s) > limit else list(s) for s in sources]
    if n_long := sum(len(s) > limit for s in sources):
        log.warning("%d source(s) longer than %d tokens were cut to fit the model", n_long, limit)
    limits = {"bos_id": BOS_ID, "eos_id": EOS_ID}
    limits.update(max_len_a=settings.max_len_a, max_len_b=settings.max_len_b)
    # A beam multiplies the batch by beam_size; keep the decoding batch's size the same.
    budget = max(settings.max_tokens // settings.beam_size, 1)
    for indices in inference_batches([len(s) for s in clipped], max_tokens=budget):
        yield indices, pad([clipped[i] for i in indices], PAD_ID).to(settings.device), limits


def translate_texts(
    model: Model, tokenizer: Tokenizer, texts: Sequence[str], settings: DecodeSettings
) -> list[str]:
    """Translate sentences; an empty (or blank) input line gives an empty output line."""
    todo, sources = _framed_nonblank(tokenizer, texts)
    out_ids = translate_ids(model, sources, settings)
    result = [""] * len(texts)
    for i, text in zip(todo, tokenizer.decode_tgt(out_ids), strict=True):
        result[i] = text
    return result


def translate_texts_nbest(
    model: Model,
    tokenizer: Tokenizer,
    texts: Sequence[str],
    settings: DecodeSettings,
    n_best: int,
) -> list[list[tuple[str, float]]]:
    """The `n_best` translations of each sentence with their scores, best first; a blank input
    line gives `n_best` empty translations scored 0 (the empty output is certain)."""
    todo, sources = _framed_nonblank(tokenizer, texts)
    found = translate_nbest_ids(model, sources, settings, n_best)
    result = [[("", 0.0)] * n_best for _ in texts]
    for i, hypotheses in zip(todo, found, strict=True):
        decoded = tokenizer.decode_tgt([h.tokens for h in hypotheses])
        result[i] = [(text, h.score) for text, h in zip(decoded, hypotheses, strict=True)]
    return result


def _framed_nonblank(
    tokenizer: Tokenizer, texts: Sequence[str]
) -> tuple[list[int], list[list[int]]]:
    """The indices of the non-blank texts, and those texts encoded and framed (ids + EOS)."""
    todo = [i for i, t in enumerate(texts) if t.strip()]
    encoded = tokenizer.encode_src([texts[i].strip() for i in todo])
    return todo, [ids + [EOS_ID] for ids in encoded]


def teacher_forced_loss(model: Model, split: EncodedSplit, settings: DecodeSettings) -> float:
    """Mean negative log-likelihood per real target token (no label smoothing)."""
    total = -sum(sequence_log_probs(model, split.src, split.tgt, settings))
    # the tokens predicted: all but BOS, at most the positional table's (as sequence_log_probs)
    count = sum(min(len(t) - 1, model.max_len) for t in split.tgt)
    return total / max(count, 1)


@torch.inference_mode()
def sequence_log_probs(
    model: Model,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    settings: DecodeSettings,
) -> list[float]:
    """log p(target | source) of each framed pair (src = ids + EOS, tgt = BOS + ids + EOS): the
    sum over the target's tokens, EOS included, in input order. Pairs longer than the positional
    table are cut to fit it."""
    model.eval()
    limit = model.max_len
    src = [s if len(s) <= limit else [*s[: limit - 1], EOS_ID] for s in sources]
    tgt = [t if len(t) <= limit + 1 else [*t[:limit], EOS_ID] for t in targets]
    lengths = [max(len(s), len(t)) for s, t in zip(src, tgt, strict=True)]
    result = [0.0] * len(src)
    for indices in inference_batches(lengths, max_tokens=settings.max_tokens):
        batch = collate([src[i] for i in indices], [tgt[i] for i in indices])
        batch = batch.to(settings.device)
        real = batch.tgt_out != PAD_ID  # (B, T)
        with autocast(settings.device, settings.dtype):
            logits = model(batch.src, batch.tgt_in, keep=real)  # (N, V), real positions in order
        log_probs = logits.float().log_softmax(dim=-1)
        picked = log_probs.gather(1, batch.tgt_out[real].unsqueeze(1)).squeeze(1)  # (N,)
        rows = real.nonzero()[:, 0]  # the sentence of each real position
        sums = torch.zeros(len(indices), device=picked.device).index_add_(0, rows, picked)
        for i, value in zip(indices, sums.tolist(), strict=True):
            result[i] = value
    return result


def score_translations(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """sacreBLEU on detokenized cased text (with signature), lowercased BLEU, chrF, exact match,
    and the lengths behind BLEU's brevity penalty: hypothesis and reference tokens (sacreBLEU's
    tokenizer), their ratio (null when the references are empty) and the penalty itself."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    hyps, refs = list(hypotheses), [list(references)]
    bleu = sacrebleu.metrics.BLEU()
    cased = bleu.corpus_score(hyps, refs)
    lower = sacrebleu.metrics.BLEU(lowercase=True).corpus_score(hyps, refs)
    chrf = sacrebleu.metrics.CHRF().corpus_score(hyps, refs)
    pairs = zip(hyps, refs[0], strict=True)
    same = sum(" ".join(h.split()) == " ".join(r.split()) for h, r in pairs)
    return {
        "bleu": round(cased.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "bleu_lowercase": round(lower.score, 2),
        "chrf": round(chrf.score, 2),
        "exact_match": round(same / max(len(hyps), 1), 4),
        "sentences": len(hyps),
        "hyp_len": cased.sys_len,
        "ref_len": cased.ref_len,
        "length_ratio": round(cased.ratio, 4) if cased.ref_len else None,  # sacreBLEU says 0
        "brevity_penalty": round(cased.bp, 4),
    }


def split_nbest(
    model: Model, tokenizer: Tokenizer, split: EncodedSplit, settings: DecodeSettings
) -> list[list[tuple[str, float]]]:
    """The whole beam (`settings.beam_size` hypotheses) of each source of a split, as (text,
    score) pairs, best first."""
    found = translate_nbest_ids(model, split.src, settings, settings.beam_size)
    texts = iter(tokenizer.decode_tgt([h.tokens for beam in found for h in beam]))
    return [[(next(texts), h.score) for h in beam] for beam in found]


def evaluate_split(
    model: Model,
    tokenizer: Tokenizer,
    split: EncodedSplit,
    settings: DecodeSettings,
    *,
    rerank: Rerank | None = None,
) -> tuple[dict, list[str]]:
    """Loss, perplexity and translation scores of a split; also returns the hypotheses. With
    `rerank` (sources, n-best lists -> re-sorted lists; `tfm.reranking`), each hypothesis is the
    best of the whole beam after reranking."""
    loss = teacher_forced_loss(model, split, settings)
    if rerank is None:
        hypotheses = tokenizer.decode_tgt(translate_ids(model, split.src, settings))
    else:
        nbest = split_nbest(model, tokenizer, split, settings)
        hypotheses = [ranked[0][0] for ranked in rerank(split.src_text, nbest)]
    scores = score_translations(hypotheses, split.tgt_text)
    scores["loss"] = round(loss, 4)
    scores["perplexity"] = round(math.exp(min(loss, 50.0)), 3)
    return scores, hypotheses

"""Translating with an exported folder: CTranslate2's search, tfm's tokenizer, tfm's settings.

Sources are encoded and outputs detokenised by the folder's tokenizer.json, exactly as
`tfm translate` does; the decoding settings default to the folder's config.yaml (`decoding.*`),
and map onto CTranslate2 as follows.

- Greedy search is `beam_size` 1 in both: the same search.
- Output limit: tfm allows floor(a * S + b) tokens, EOS included, clamped to [1, max_len], for
  each sentence, S its source length with EOS. CTranslate2 takes one `max_decoding_length` per
  call, so sentences are grouped by their limit and each group decoded with it (the groups run
  asynchronously, so `inter_threads` > 1 decodes several at once): every sentence gets exactly
  its own limit. Sources longer than the positional table are cut to max_len - 1 tokens + EOS
  as tfm cuts them (CTranslate2's own `max_input_length` is off), and `min_decoding_length` is
  0, since tfm lets EOS come first (CTranslate2's default of 1 would not).
- Beam search picks candidates as tfm does: each step keeps the 2K best extensions, those
  ending in EOS among the best K finish and the best K others live on, and a sentence ends with
  K finished hypotheses or at its limit. The length penalty differs in form: tfm divides a
  hypothesis's log-probability by GNMT's ((5 + |Y|) / 6)^alpha, CTranslate2 by |Y|^beta (|Y|
  the generated tokens, EOS included, which `return_end_token` makes CTranslate2 count too).
  CTranslate2 is run with beta = alpha (1e-6 for alpha 0: with beta 0 it changes its stopping
  rule, waiting also for a step where its top beam ends), returns its K best finished
  hypotheses, and these are re-ranked by tfm's GNMT score, computed from the log-probability
  recovered as score * |Y|^beta. What can still differ: (1) a sentence can finish with up to 2K - 1
  hypotheses; tfm ranks all of them, here only the K that CTranslate2's |Y|^alpha ranks best,
  so the GNMT-best is lost only when K others outrank it under |Y|^alpha; (2) at the length
  limit tfm also finishes the live beams taken from candidates K+1..2K, which never beat the
  best hypothesis but can enter an n-best list; (3) CTranslate2's kernels round differently
  from PyTorch's, so a near-tie between two tokens can break the other way.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfm.config import Config, load_config
from tfm.data.tokenizer import EOS_ID, Tokenizer
from tfm.deploy.export import (
    ExportInfo,
    check_compute_type,
    compute_type,
    read_export_info,
    require_ctranslate2,
)
from tfm.errors import UsageError
from tfm.prediction.settings import DecodeSettings

log = logging.getLogger(__name__)

ZERO_PENALTY = 1e-6  # CTranslate2's length penalty for tfm's alpha = 0 (see the docstring)


@dataclass(frozen=True)
class ExportedModel:
    """An exported folder opened for translation."""

    translator: Any  # a ctranslate2.Translator (ctranslate2 ships no type hints)
    tokenizer: Tokenizer
    config: Config
    info: ExportInfo
    path: Path


def open_export(
    model_dir: str | Path, *, device: str = "cpu", threads: int = 1, inter_threads: int = 1
) -> ExportedModel:
    """Load an exported folder on `device` ("cpu" or "cuda") with `threads` threads per
    translation and `inter_threads` translations in parallel; the quantization it was exported
    with must be one the device can run (UsageError otherwise)."""
    ctranslate2 = require_ctranslate2()
    path = Path(model_dir)
    info = read_export_info(path)
    kind = compute_type(info.quantization)
    check_compute_type(kind, device)
    tokenizer = Tokenizer.load(path)
    if tokenizer.fingerprint() != info.tokenizer_fingerprint:
        raise UsageError(f"{path}: tokenizer.json is not the tokenizer the model was exported with")
    translator = ctranslate2.Translator(
        str(path), device=device, compute_type=kind, inter_threads=inter_threads,
        intra_threads=threads,
    )  # fmt: skip
    config = load_config(path / "config.yaml", stored=True)
    return ExportedModel(translator, tokenizer, config, info, path)


def translate_nbest_ids(
    model: ExportedModel,
    sources: Sequence[Sequence[int]],
    settings: DecodeSettings,
    n_best: int = 1,
    *,
    with_scores: bool = True,
) -> list[list[tuple[list[int], float]]]:
    """Decode framed sources (ids + EOS) as `tfm.prediction.translate.translate_nbest_ids`
    does: per source its `n_best` hypotheses, best first, as (output ids without BOS and EOS,
    tfm's score: log-probability / GNMT penalty). Without `with_scores`, greedy search skips
    computing log-probabilities and every score is NaN."""
    K = settings.beam_size
    if K < 1 or not 1 <= n_best <= K:
        raise ValueError(f"need beam_size >= 1 and 1 <= n_best <= beam_size, got {K=}, {n_best=}")
    pieces, groups = _by_output_limit(model, sources, settings)
    scored = with_scores or K > 1
    beta = (settings.length_penalty or ZERO_PENALTY) if K > 1 else 0.0
    pending = []
    for limit, indices in groups.items():
        results = model.translator.translate_batch(
            [pieces[i] for i in indices], asynchronous=True,
            max_batch_size=max(settings.max_tokens // K, 1), batch_type="tokens",
            beam_size=K, num_hypotheses=K, length_penalty=beta, return_scores=scored,
            return_end_token=True, max_input_length=0, max_decoding_length=limit,
            min_decoding_length=0,
        )  # fmt: skip
        pending.append((indices, results))
    outputs: list[list[tuple[list[int], float]]] = [[] for _ in sources]
    token_id = _target_ids(model)
    for indices, results in pending:
        for i, result in zip(indices, results, strict=True):
            result = result.result()
            scores = result.scores if scored else [math.nan] * len(result.hypotheses)
            found = [
                _hypothesis(tokens, score, token_id, beta, settings.length_penalty)
                for tokens, score in zip(result.hypotheses, scores, strict=True)
            ]
            outputs[i] = sorted(found, key=lambda h: h[1], reverse=True)[:n_best]
    return outputs


def _by_output_limit(
    model: ExportedModel, sources: Sequence[Sequence[int]], settings: DecodeSettings
) -> tuple[list[list[str]], dict[int, list[int]]]:
    """Each source as token strings without its EOS (CTranslate2 appends it), cut to the
    positional table as tfm cuts it; and the sources' indices grouped by their output limit."""
    max_len = model.info.max_len
    pieces = []
    groups: dict[int, list[int]] = defaultdict(list)  # output limit -> source indices
    for i, ids in enumerate(sources):
        if not ids or ids[-1] != EOS_ID:
            raise ValueError(f"source {i} is not framed (ids + EOS {EOS_ID}): {list(ids)[-5:]}")
        ids = list(ids) if len(ids) <= max_len else [*ids[: max_len - 1], EOS_ID]
        pieces.append(model.tokenizer.src_pieces(ids[:-1]))
        limit = math.floor(settings.max_len_a * len(ids) + settings.max_len_b)
        groups[min(max(limit, 1), max_len)].append(i)
    if n_long := sum(len(ids) > max_len for ids in sources):
        log.warning("%d source(s) longer than %d tokens were cut to fit the model", n_long, max_len)
    return pieces, groups


def _target_ids(model: ExportedModel) -> dict[str, int]:
    tokens = model.tokenizer.tgt_pieces(range(model.tokenizer.tgt_vocab_size))
    return {token: i for i, token in enumerate(tokens)}


def _hypothesis(
    tokens: list[str], score: float, token_id: dict[str, int], beta: float, alpha: float
) -> tuple[list[int], float]:
    """tfm's hypothesis from CTranslate2's: tokens (ending in </s> unless cut at the limit) and
    score, log P / |Y|^beta, re-normalised by GNMT's penalty."""
    ids = [token_id[token] for token in tokens]
    length = len(ids)  # |Y|, EOS included
    if ids and ids[-1] == EOS_ID:
        ids = ids[:-1]
    log_prob = score * length**beta
    return ids, log_prob / ((5 + length) / 6) ** alpha  # GNMT (Wu et al., 2016)

"""Translating with an exported folder: CTranslate2's search, tfm's tokenizer, tfm's settings.

Sources are encoded and outputs detokenised by the folder's tokenizer.json, exactly as
`tfm translate` does; the decoding settings default to the folder's config.yaml (`decoding.*`),
and each strategy maps onto CTranslate2's options (`ct2_search`) as follows.

- Greedy search is CTranslate2's `beam_size` 1 with length penalty 0 (its score is then
  log P(Y | X), as tfm's): the same search.
- Sampling is CTranslate2's random sampling: `sampling_temperature`, `sampling_topk` and
  `sampling_topp` reshape the distribution in tfm's order (temperature, the top k, then the top
  p; a top k of the vocabulary or more is all of it, as in tfm), a sample scores log P(Y | X)
  under the model, and an n-best list is that many samples.
  Its random stream belongs to each worker thread, seeded when the translator starts: it cannot
  repeat a call's samples, so a `seed` is refused.
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
from collections.abc import Callable, Sequence
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
from tfm.prediction.strategies import BeamSearch, GreedySearch, Sampling, Strategy

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
    """Decode framed sources (ids + EOS) as `tfm.prediction.translate.search_ids` does: per
    source the hypotheses `settings.strategy` finds when `n_best` are wanted, best first, as
    (output ids without BOS and EOS, tfm's score). Without `with_scores`, a strategy that needs
    no scores to rank skips computing them and every score is NaN. UsageError for a strategy
    CTranslate2 cannot decode with."""
    options, rescore = ct2_search(settings.strategy, n_best)
    if options.get("sampling_topk", 0) >= model.tokenizer.tgt_vocab_size:
        options["sampling_topk"] = 0  # all tokens: CTranslate2 refuses more than it has
    scored = with_scores or rescore is not None
    pieces, groups = _by_output_limit(model, sources, settings)
    pending = []
    for limit, indices in groups.items():
        results = model.translator.translate_batch(
            [pieces[i] for i in indices], asynchronous=True,
            max_batch_size=settings.batch_source_tokens(n_best), batch_type="tokens",
            return_scores=scored, return_end_token=True, max_input_length=0,
            max_decoding_length=limit, min_decoding_length=0, **options,
        )  # fmt: skip
        pending.append((indices, results))
    outputs: list[list[tuple[list[int], float]]] = [[] for _ in sources]
    token_id = _target_ids(model)
    for indices, results in pending:
        for i, result in zip(indices, results, strict=True):
            result = result.result()
            scores = result.scores if scored else [math.nan] * len(result.hypotheses)
            found = [
                _hypothesis(tokens, score, token_id, rescore)
                for tokens, score in zip(result.hypotheses, scores, strict=True)
            ]
            outputs[i] = sorted(found, key=lambda h: h[1], reverse=True)
    return outputs


def score_ids(
    model: ExportedModel,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    settings: DecodeSettings,
) -> list[float]:
    """The mean log-probability per token of each target (ids without BOS and EOS; </s>
    counted, as tfm's teacher-forced pass counts it) given its framed source, by CTranslate2's
    `score_batch`; sources are cut to the positional table as for decoding, targets to it
    with their </s>."""
    pieces, _ = _by_output_limit(model, sources, settings)
    limit = model.info.max_len - 1
    outputs = [model.tokenizer.tgt_pieces(list(ids)[:limit]) for ids in targets]
    results = model.translator.score_batch(pieces, outputs, max_batch_size=settings.max_tokens,
                                           batch_type="tokens", max_input_length=0)  # fmt: skip
    return [sum(result.log_probs) / len(result.log_probs) for result in results]


Rescore = Callable[[float, int], float]  # CTranslate2's score, |Y| -> tfm's score


def ct2_search(strategy: Strategy, n_best: int) -> tuple[dict[str, Any], Rescore | None]:
    """`translate_batch`'s options for `strategy` finding its hypotheses when `n_best` are
    wanted, and the function that turns CTranslate2's scores into tfm's (None: they are tfm's,
    log P(Y | X)). UsageError for a strategy, or a setting, CTranslate2 cannot decode with."""
    mapping = _MAPPINGS.get(type(strategy))
    if mapping is None:
        raise UsageError(f"strategy {strategy.name}: a CTranslate2 export cannot decode with it; "
                         "decode with the tfm run it was exported from")  # fmt: skip
    return mapping(strategy, n_best)


def _greedy(strategy: Strategy, n_best: int) -> tuple[dict[str, Any], Rescore | None]:
    """The same search; a length penalty of 0 leaves CTranslate2's score log P(Y | X)."""
    return {"beam_size": 1, "num_hypotheses": 1, "length_penalty": 0.0}, None


def _beam(strategy: Strategy, n_best: int) -> tuple[dict[str, Any], Rescore | None]:
    """The whole beam, re-ranked by GNMT's penalty (see the module's docstring)."""
    assert isinstance(strategy, BeamSearch)
    K, alpha = strategy.beam_size, strategy.length_penalty
    beta = alpha or ZERO_PENALTY

    def rescore(score: float, length: int) -> float:  # log P = score * |Y|^beta, over GNMT
        return score * length**beta / ((5 + length) / 6) ** alpha  # GNMT (Wu et al., 2016)

    return {"beam_size": K, "num_hypotheses": K, "length_penalty": beta}, rescore


def _sampling(strategy: Strategy, n_best: int) -> tuple[dict[str, Any], Rescore | None]:
    """CTranslate2's random sampling reshapes the distribution as tfm does (temperature, then the
    top k, then the top p) and scores a sample log P(Y | X). Its random stream is per worker
    thread, seeded when the translator starts: it cannot repeat a call's samples."""
    assert isinstance(strategy, Sampling)
    if strategy.seed is not None:
        raise UsageError(
            f"seed {strategy.seed}: a CTranslate2 export cannot repeat seeded samples; sample "
            "without a seed (--seed, decoding.seed), or decode with the tfm run"
        )
    options = {
        "beam_size": 1, "length_penalty": 0.0, "sampling_temperature": strategy.temperature,
        "sampling_topk": strategy.top_k, "sampling_topp": strategy.top_p,
        "num_hypotheses": 1 if strategy.top_k == 1 else n_best,  # top k 1: one greedy output
    }  # fmt: skip
    return options, None


_MAPPINGS: dict[type, Callable[[Any, int], tuple[dict[str, Any], Rescore | None]]] = {
    GreedySearch: _greedy,
    BeamSearch: _beam,
    Sampling: _sampling,
}


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
        groups[settings.limit.tokens(len(ids), max_len)].append(i)
    if n_long := sum(len(ids) > max_len for ids in sources):
        log.warning("%d source(s) longer than %d tokens were cut to fit the model", n_long, max_len)
    return pieces, groups


def _target_ids(model: ExportedModel) -> dict[str, int]:
    tokens = model.tokenizer.tgt_pieces(range(model.tokenizer.tgt_vocab_size))
    return {token: i for i, token in enumerate(tokens)}


def _hypothesis(
    tokens: list[str], score: float, token_id: dict[str, int], rescore: Rescore | None
) -> tuple[list[int], float]:
    """tfm's hypothesis from CTranslate2's: tokens (ending in </s> unless cut at the limit) and
    score, `rescore`d with |Y| (the generated tokens, EOS included)."""
    ids = [token_id[token] for token in tokens]
    length = len(ids)
    if ids and ids[-1] == EOS_ID:
        ids = ids[:-1]
    return ids, score if rescore is None else rescore(score, length)

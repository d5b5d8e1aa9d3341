"""`tfm rerank-sweep`: choose the reranking weight W on the validation split, then score the test
split with it.

Each split's beam is decoded once by the forward run (or ensemble), through its `Translator`,
and every hypothesis scored once by the reverse run(s) (`Reranker.channel_of`); each weight then
only re-sorts (`Reranker.combine`). So a sweep costs one decode and one teacher-forced pass per
split, however many weights it tries, and each of its rows is what `tfm eval --split S
--beam-size B --rerank-with ... --rerank-weight W` reports. The test scores are shown for every
weight, to show the curve's shape; only the validation scores choose.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from tfm.commands.engines import open_translator
from tfm.data.cache.corpus_record import remember_held_out
from tfm.data.pipeline import prepare_splits
from tfm.errors import UsageError
from tfm.prediction.opening import for_reranking, open_reranker
from tfm.prediction.reranking import Reranker
from tfm.prediction.scoring import score_translations
from tfm.prediction.settings import DecodeRequest
from tfm.prediction.translator import Translator

log = logging.getLogger(__name__)

SPLITS = ("validation", "test")
CHOOSE_BY = ("bleu_lowercase", "bleu")
DEFAULT_WEIGHTS = (0.0, 1.0, 2.0, 3.0, 3.5, 4.0, 5.0)
Beams = dict[str, tuple[list, list[list[float]], list[str]]]  # split: (n-best, channel, refs)


@dataclass(frozen=True)
class Sweep:
    """tfm's scores of each split's reranked best at each weight, {W: {split: scores}}, and the
    weight of the best validation score under `choose_by` (the smallest on a tie)."""

    table: dict[float, dict[str, dict]]
    choose_by: str
    chosen: float


def rerank_sweep(
    request: DecodeRequest, weights: Sequence[float], *, choose_by: str = "bleu_lowercase"
) -> Sweep:
    """The sweep of `weights` over the run, ensemble and reverse run(s) of `request` (its
    `rerank_weight` is not used). Raises UsageError without reverse runs, weights or a known
    `choose_by`."""
    if not request.rerank_with:
        raise UsageError("give --rerank-with RUN: the reverse-direction run(s) to rerank with")
    if not weights or min(weights) < 0:
        raise UsageError(f"--weight: expected one or more weights >= 0, got {list(weights)}")
    if choose_by not in CHOOSE_BY:
        raise UsageError(f"--choose-by {choose_by!r}: expected {' or '.join(CHOOSE_BY)}")
    forward = dataclasses.replace(for_reranking(request), rerank_with=(), rerank_weight=None)
    translator = open_translator(forward)
    reranker = open_reranker(translator.config, translator.tokenizer, request.rerank_with, 1.0,
                             translator.settings.torch_device())  # fmt: skip
    assert reranker is not None  # rerank_with is given
    table = _sweep(reranker, _decode_and_score(translator, reranker), weights)
    return Sweep(table, choose_by, choose(table, choose_by))


def choose(table: dict[float, dict[str, dict]], metric: str) -> float:
    """The weight of the best validation score under `metric`, the first (smallest) on a tie."""
    return max(sorted(table), key=lambda weight: table[weight]["validation"][metric])


def format_sweep(sweep: Sweep) -> str:
    """One Markdown row per weight (lowercased BLEU, cased BLEU and length ratio, validation then
    test), then a line with the chosen weight and its test scores."""
    lines = [
        "| W | validation lc | validation cased | validation length ratio | "
        "test lc | test cased | test length ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for weight, scores in sweep.table.items():
        cells = [
            f"{scores[s]['bleu_lowercase']:.2f} | {scores[s]['bleu']:.2f} | "
            f"{scores[s]['length_ratio']}"
            for s in SPLITS
        ]
        lines.append(f"| {weight:g} | {' | '.join(cells)} |")
    test = sweep.table[sweep.chosen]["test"]
    lines.append(
        f"chosen on validation ({sweep.choose_by}): W {sweep.chosen:g}; test "
        f"{test['bleu_lowercase']:.2f} lowercased, {test['bleu']:.2f} cased "
        f"({test['bleu_signature']}), chrF {test['chrf']:.2f}"
    )
    return "\n".join(lines)


def _decode_and_score(translator: Translator, reranker: Reranker) -> Beams:
    """Each of SPLITS decoded once by the forward run(s) (the distinct texts of the whole beam)
    and its hypotheses scored once by the reverse run(s): {split: (n-best lists, their channel
    scores, references)}."""
    config, tokenizer = translator.config, translator.tokenizer
    remember_held_out(config)  # held-out splits from the data cache, where it has them
    splits, _ = prepare_splits(config.data, config.tokenizer, SPLITS, tokenizer=tokenizer)
    beam_size = translator.settings.strategy.hypotheses(1)  # the whole beam
    beams = {}
    for name in SPLITS:
        split = splits[name]
        nbest = translator.nbest(split.src_text, beam_size)
        channel = reranker.channel_of(split.src_text, nbest)
        beams[name] = (nbest, channel, split.tgt_text)
        log.info("%s: %d beams of %d decoded and scored", name, len(nbest), beam_size)
    return beams


def _sweep(reranker: Reranker, beams: Beams, weights: Sequence[float]) -> dict:
    """{W: {split: scores of the reranked best}} from each split's beams."""
    table = {}
    for weight in weights:
        at = dataclasses.replace(reranker, weight=weight)
        table[weight] = {
            split: score_translations([r[0][0] for r in at.combine(nbest, channel)], refs)
            for split, (nbest, channel, refs) in beams.items()
        }
    return table

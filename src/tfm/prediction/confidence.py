"""The confidence of a translation: the sentence chrF it is expected to score against a human
reference, read off the model's own figures by a map fitted on the validation split.

Not in the paper. Fomicheva et al. (2020, "Unsupervised Quality Estimation for Neural Machine
Translation") show that a model's own probabilities predict the quality of its translations without
any other model; silnlp fits such a figure to chrF on held-out data. Here the figure is `log_prob`,
the mean log-probability per token (</s> included) of the translation given its source, from one
teacher-forced pass of the model over the ids the search found (a text encoded again can split into
other subwords: 6.5% of Turkish translations do, and their figure then says less). The map is
monotone: isotonic regression (pool adjacent violators) of the validation sentences' chrF on the
figure, over `BINS` bins of equal count, interpolated linearly between the pools' centres and
continued beyond the outermost by the nearest line, within 0 and 100. A higher figure never gives a
lower confidence.

Dropout variance, source coverage (cross attention), the entropy of the predictions and the
agreement of the beam's translations were measured beside it on Tatoeba runs (`bench/
confidence.py`, docs/experiments.md): none beat it on validation on every run, and agreement, the
one that did on one, needs the whole beam, which greedy search and given translations lack.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tfm.errors import CheckpointError
from tfm.json_file import read_json
from tfm.rundir.manifest import check_manifest, replace_text

CONFIDENCE_FILE = "confidence.json"
FORMAT, VERSION = "tfm-confidence", 1
BINS = 20  # the map's bins of validation sentences (50 each for a split of 1,000)
# The strategies that look for the most likely translation: the figures of their translations
# mean the same (a map fitted on one reads the other's), unlike those of a sampled translation.
SEARCHES = ("greedy", "beam")
LOW_SHARE = 0.1  # a confidence among the validation's lowest tenth is flagged as low


def sentence_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
    """Each hypothesis's chrF against its reference (sacreBLEU's defaults, 0 to 100)."""
    from sacrebleu.metrics import CHRF

    metric = CHRF()
    pairs = zip(hypotheses, references, strict=True)
    return [metric.sentence_score(h, [r]).score for h, r in pairs]


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of two equally long sequences (ties take their mean rank);
    NaN when either is constant."""
    x, y = _ranks(np.asarray(a, float)), _ranks(np.asarray(b, float))
    if len(x) != len(y):
        raise ValueError(f"{len(x)} values against {len(y)}")
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    _, group, counts = np.unique(values, return_inverse=True, return_counts=True)
    return (np.bincount(group, weights=ranks) / counts)[group]


def low_share_gap(confidence: Sequence[float], chrf: Sequence[float]) -> float:
    """The mean chrF of all sentences minus that of the `LOW_SHARE` least confident."""
    scores = np.asarray(chrf, float)
    lowest = np.argsort(np.asarray(confidence, float), kind="stable")
    count = max(1, int(len(scores) * LOW_SHARE))
    return float(scores.mean() - scores[lowest[:count]].mean())


@dataclass(frozen=True)
class ConfidenceMap:
    """A monotone map from `log_prob` to the expected sentence chrF: `knots`, (figure, chrF)
    pairs in strictly increasing order of both, joined by straight lines and continued beyond
    the outermost by the nearest line, within 0 to 100; `low`, the confidence below which a
    translation is among the validation's least confident tenth; `strategy`, the decoding
    strategy whose translations it was fitted on."""

    knots: tuple[tuple[float, float], ...]
    low: float
    strategy: str
    fitted: dict[str, Any] = field(default_factory=dict, compare=False)  # how, for reports

    def reads(self, strategy: str) -> bool:
        """Whether the map reads the figures of translations that `strategy` found: those of
        its own strategy, and of greedy and beam search alike (`SEARCHES`)."""
        return strategy == self.strategy or {strategy, self.strategy} <= set(SEARCHES)

    def __call__(self, log_prob: float) -> float:
        """The expected chrF of a translation whose mean log-probability is `log_prob`, to two
        decimals."""
        (first, only), last = self.knots[0], self.knots[-1][0]
        if len(self.knots) == 1:
            value = only
        elif log_prob < first or log_prob > last:  # the outermost line, continued
            (xa, ya), (xb, yb) = self.knots[:2] if log_prob < first else self.knots[-2:]
            value = ya + (yb - ya) / (xb - xa) * (log_prob - xa)
        else:
            xs, ys = zip(*self.knots, strict=True)
            value = float(np.interp(log_prob, xs, ys))
        return round(min(max(value, 0.0), 100.0), 2)

    @classmethod
    def fit(cls, log_probs: Sequence[float], chrf: Sequence[float], strategy: str) -> ConfidenceMap:
        """The map fitted to the figures and chrF scores of sentences that `strategy` translated
        (see the module docstring)."""
        if len(log_probs) != len(chrf) or not log_probs:
            raise ValueError(f"{len(log_probs)} figures against {len(chrf)} scores")
        order = np.argsort(np.asarray(log_probs, float), kind="stable")
        x, y = np.asarray(log_probs, float)[order], np.asarray(chrf, float)[order]
        bins = np.array_split(np.arange(len(x)), min(BINS, len(x)))
        knots = _isotonic([(float(x[b].sum()), float(y[b].sum()), len(b)) for b in bins])
        fitted = cls(knots=knots, low=0.0, strategy=strategy)
        confidences = sorted(fitted(v) for v in log_probs)
        low = confidences[int(len(confidences) * LOW_SHARE)]
        return cls(knots=knots, low=low, strategy=strategy)


def _isotonic(bins: list[tuple[float, float, int]]) -> tuple[tuple[float, float], ...]:
    """Bins of sentences in increasing order of their figure, each (sum of figures, sum of
    chrF, count), pooled until their mean chrF strictly increases (pool adjacent violators:
    the nearest non-decreasing sequence in least squares); the knot of each pool is its mean
    figure and mean chrF, rounded for the file (figures to 4 decimals, chrF to 2)."""
    pools: list[list[float]] = []
    for figures, scores, count in bins:
        pools.append([figures, scores, float(count)])
        while len(pools) > 1 and pools[-2][1] / pools[-2][2] >= pools[-1][1] / pools[-1][2]:
            last = pools.pop()
            pools[-1] = [a + b for a, b in zip(pools[-1], last, strict=True)]
    knots: list[tuple[float, float]] = []
    for total, scores, sentences in pools:
        x, y = round(total / sentences, 4), round(scores / sentences, 2)
        if not knots or (x > knots[-1][0] and y > knots[-1][1]):  # rounding may make a tie
            knots.append((x, y))
    return tuple(knots)


def read_figures(
    found: ConfidenceMap | None, figures: Sequence[float | None]
) -> list[float | None]:
    """The confidence `found` gives each figure; None for a figure that is None, and for all
    without a map."""
    return [None if found is None or figure is None else found(figure) for figure in figures]


@dataclass(frozen=True)
class Judged:
    """One translation against its reference: its confidence and figure (None: see
    `read_figures`, `Translator.figures`) and its sentence chrF."""

    confidence: float | None
    log_prob: float | None
    chrf: float


REPORT_KEYS = ("mean_confidence", "mean_sentence_chrf", "confidence_spearman",
               "confidence_low_tenth_gap")  # fmt: skip


def confidence_report(judged: Sequence[Judged]) -> dict[str, float | None]:
    """How well the confidences of translations foretell their sentence chrF, over those that
    have one: the mean confidence beside the mean sentence chrF, Spearman's rho between the
    two, and how far below the mean the least confident tenth scores (`low_share_gap`)."""
    confidences = [j.confidence for j in judged if j.confidence is not None]
    chrf = [j.chrf for j in judged if j.confidence is not None]
    if not confidences:
        return dict.fromkeys(REPORT_KEYS)
    figures = (float(np.mean(confidences)), float(np.mean(chrf)), spearman(confidences, chrf),
               low_share_gap(confidences, chrf))  # fmt: skip
    return {key: round(value, 4) for key, value in zip(REPORT_KEYS, figures, strict=True)}


def save_map(root: Path, found: ConfidenceMap, model_digest: str) -> Path:
    """Write `found` as the run directory's confidence.json for the model file whose digest is
    `model_digest`, its digest in the run's manifest (`tfm.rundir.manifest`)."""
    content = {"format": FORMAT, "version": VERSION, "model_digest": model_digest,
               "figure": "log_prob", "strategy": found.strategy,
               "knots": [list(k) for k in found.knots], "low": found.low,
               "fitted": found.fitted}  # fmt: skip
    replace_text(root, CONFIDENCE_FILE, json.dumps(content, indent=1) + "\n")
    return root / CONFIDENCE_FILE


def load_map(root: Path, model_digest: str | None) -> tuple[ConfidenceMap | None, str]:
    """The run directory's map for the model file whose digest is `model_digest`, or None and
    why there is none (a sentence naming what to run); a map that is there but cannot be read,
    or was changed after it was written, is a CheckpointError."""
    path = root / CONFIDENCE_FILE
    refit = f"`tfm calibrate --run {root}` fits one"
    if not path.is_file():
        return None, f"{root} has no confidence map ({CONFIDENCE_FILE}); {refit}"
    check_manifest(root, [CONFIDENCE_FILE])
    found, digest = read_map(path)
    if digest != model_digest:
        return None, f"{path} was fitted for another model file than the one decoding; {refit}"
    return found, ""


def read_map(path: Path) -> tuple[ConfidenceMap, str]:
    """The map in the file `path` and the digest of the model file it was fitted for; a
    CheckpointError, saying what to run, when it cannot be read."""
    root = path.parent
    content = read_json(path, error=CheckpointError, missing="", what="the confidence map")
    try:
        if (content["format"], content["version"]) != (FORMAT, VERSION):
            raise ValueError(f"not a {FORMAT} version {VERSION} file")
        knots = tuple((float(x), float(y)) for x, y in content["knots"])
        found = ConfidenceMap(knots=knots, low=float(content["low"]),
                              strategy=str(content["strategy"]),
                              fitted=dict(content["fitted"]))  # fmt: skip
        digest = str(content["model_digest"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: cannot read the confidence map ({exc}); delete it "
                              f"and run tfm calibrate --run {root}") from None  # fmt: skip
    if not knots:
        raise CheckpointError(f"{path}: the confidence map has no knots; delete it and run "
                              f"tfm calibrate --run {root}")  # fmt: skip
    return found, digest

"""The confidence map: Spearman's rho against the textbook formula, the monotone fit (pooled where
the data fall, continued beyond the ends within 0 to 100), the low mark, and the map's file in a
run directory (written under the manifest, refused when changed, and not used for another
model)."""

import dataclasses
import json
import math
import random

import pytest

from tfm.errors import CheckpointError
from tfm.prediction.confidence import (
    CONFIDENCE_FILE,
    ConfidenceMap,
    Judged,
    confidence_report,
    load_map,
    low_share_gap,
    save_map,
    spearman,
)
from tfm.rundir.manifest import record_manifest


def test_spearman_is_the_textbook_rank_correlation_with_ties_at_their_mean_rank():
    a = [3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0]
    b = [2.0, 7.0, 1.0, 8.0, 2.5, 3.0, 9.0, 4.0]
    rank = {v: i for i, v in enumerate(sorted(a))}, {v: i for i, v in enumerate(sorted(b))}
    d2 = sum((rank[0][x] - rank[1][y]) ** 2 for x, y in zip(a, b, strict=True))
    n = len(a)
    assert spearman(a, b) == pytest.approx(1 - 6 * d2 / (n * (n**2 - 1)))
    # Ties: [1, 2, 2, 3] ranks as [0, 1.5, 1.5, 3]; against 0..3, Pearson of those ranks.
    assert spearman([1, 2, 2, 3], [0, 1, 2, 3]) == pytest.approx(0.9486833)
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))  # a constant has no ranks


def test_the_least_confident_tenth_and_the_report_of_a_scored_split():
    confidence = list(range(20))
    chrf = [10.0, 20.0] + [50.0] * 18  # the two least confident score 15 on average
    assert low_share_gap(confidence, chrf) == pytest.approx(sum(chrf) / 20 - 15.0)
    judged = [Judged(c, -1.0, s) for c, s in zip(confidence, chrf, strict=True)]
    report = confidence_report([*judged, Judged(None, None, 0.0)])  # a blank line: not rated
    assert report["mean_confidence"] == 9.5 and report["mean_sentence_chrf"] == 46.5
    assert report["confidence_spearman"] == pytest.approx(spearman(confidence, chrf), abs=1e-4)
    assert confidence_report([Judged(None, None, 3.0)])["confidence_spearman"] is None


def noisy_sentences(count: int, seed: int = 0) -> tuple[list[float], list[float]]:
    """Figures in [-2, 0] and chrF scores that rise with them, with noise."""
    draw = random.Random(seed)
    figures = [draw.uniform(-2.0, 0.0) for _ in range(count)]
    return figures, [min(max(80 + 30 * f + draw.gauss(0, 12), 0), 100) for f in figures]


def test_the_map_is_monotone_near_the_chrf_of_sentences_like_it_and_flags_the_lowest_tenth():
    figures, chrf = noisy_sentences(1000)
    found = ConfidenceMap.fit(figures, chrf, "beam")
    xs = [k[0] for k in found.knots]
    ys = [k[1] for k in found.knots]
    assert xs == sorted(set(xs)) and ys == sorted(set(ys)) and len(found.knots) > 5
    grid = [-3 + i / 50 for i in range(175)]
    values = [found(x) for x in grid]
    assert values == sorted(values) and all(0 <= v <= 100 for v in values)
    for centre in (-1.5, -1.0, -0.5):  # the sentences near a figure score what the map says
        near = [c for f, c in zip(figures, chrf, strict=True) if abs(f - centre) < 0.1]
        assert found(centre) == pytest.approx(sum(near) / len(near), abs=3)
    below = sum(found(f) < found.low for f in figures)
    assert 80 <= below <= 100  # the lowest tenth, ties at the mark aside
    assert spearman([found(f) for f in figures], chrf) == pytest.approx(
        spearman(figures, chrf), abs=0.01
    )


def test_the_fit_pools_bins_that_fall_and_continues_the_outer_lines_within_0_and_100():
    # Four bins of two sentences: chrF 10, 30, 20, 40 by increasing figure.
    figures = [-4.0, -3.9, -3.0, -2.9, -2.0, -1.9, -1.0, -0.9]
    chrf = [10.0, 10.0, 30.0, 30.0, 20.0, 20.0, 40.0, 40.0]
    found = ConfidenceMap.fit(figures, chrf, "beam")
    # Bins 2 and 3 fall: pooled at their mean figure and chrF.
    assert found.knots == ((-3.95, 10.0), (-2.45, 25.0), (-0.95, 40.0))
    assert found(-2.45) == 25.0 and found(-1.7) == pytest.approx(32.5)
    assert found(-0.45) == pytest.approx(45.0)  # the last line, continued
    assert found(30.0) == 100.0 and found(-40.0) == 0.0
    flat = ConfidenceMap.fit([-1.0, -0.5], [40.0, 20.0], "beam")  # a figure that says nothing
    assert flat.knots == ((-0.75, 30.0),) and flat(-5.0) == flat(5.0) == 30.0


def test_a_map_of_a_search_reads_greedy_and_beam_translations_and_not_samples():
    beam, sampled = (dataclasses.replace(ConfidenceMap.fit([-1.0], [40.0], strategy), low=1.0)
                     for strategy in ("beam", "sampling"))  # fmt: skip
    assert [beam.reads(s) for s in ("beam", "greedy", "sampling")] == [True, True, False]
    assert [sampled.reads(s) for s in ("beam", "greedy", "sampling")] == [False, False, True]


def test_the_map_file_round_trips_under_the_manifest_and_names_what_to_run(tmp_path):
    (tmp_path / "config.yaml").write_text("run_dir: x\n", encoding="utf-8")
    record_manifest(tmp_path)
    absent, why = load_map(tmp_path, "digest")
    assert absent is None
    assert why == f"{tmp_path} has no confidence map ({CONFIDENCE_FILE}); " \
        f"`tfm calibrate --run {tmp_path}` fits one"  # fmt: skip
    figures, chrf = noisy_sentences(200)
    fitted = ConfidenceMap.fit(figures, chrf, "beam")
    fitted = dataclasses.replace(fitted, fitted={"sentences": 200})
    path = save_map(tmp_path, fitted, "digest")
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert CONFIDENCE_FILE in manifest["files"]
    found, why = load_map(tmp_path, "digest")
    assert (found, why) == (fitted, "") and found is not None and found.fitted["sentences"] == 200
    other, why = load_map(tmp_path, "another digest")
    assert other is None and "fitted for another model file" in why and "tfm calibrate" in why

    content = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**content, "low": 99.0}), encoding="utf-8")
    with pytest.raises(CheckpointError, match="was changed after the run wrote it"):
        load_map(tmp_path, "digest")
    (tmp_path / "manifest.json").unlink()  # a run without a manifest is not checked
    path.write_text(json.dumps({**content, "knots": "none"}), encoding="utf-8")
    with pytest.raises(CheckpointError, match="cannot read the confidence map .*tfm calibrate"):
        load_map(tmp_path, "digest")

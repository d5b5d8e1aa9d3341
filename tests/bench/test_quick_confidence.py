"""bench/confidence.py --quick: a tiny toy run calibrated, its test split's confidences set
against sentence chrF, and each other figure compared with log_prob on validation and test."""

import re

from bench_reports import numbers


def test_confidence(script, capsys):
    rows = script("confidence").main(["--quick"])
    out = capsys.readouterr().out
    sentences, mean_chrf, mean_confidence = numbers(
        r"\(en-de\): test (\d+) sentences, mean sentence chrF ([\d.]+), mean confidence ([\d.]+)",
        out,
    )
    assert sentences == 60 and 0 <= mean_chrf <= 100 and 0 <= mean_confidence <= 100
    rho, gap = numbers(r"Spearman (-?[\d.]+), least confident tenth (-?[\d.]+) chrF below", out)
    assert -1 <= rho <= 1 and rho == round(rows[0]["rho"], 3) and gap == round(rows[0]["gap"], 1)
    calibrate, decode, ratio, greedy = numbers(
        r"cost: tfm calibrate ([\d.]+) s, of which decoding the validation split ([\d.]+) s; "
        r"confidences / translation time ([\d.]+)x \(/ greedy search's ([\d.]+)x\)",
        out,
    )
    assert calibrate >= 0 and decode >= 0 and ratio > 0 and greedy > 0
    sets = re.findall(
        r"^  \| (log_prob[^|]*) \| (-?[\d.]+) \| (-?[\d.]+) \| (-?[\d.]+) \|$", out, re.M
    )
    assert [s[0].strip() for s in sets] == [
        "log_prob",
        *(f"log_prob + {extra}" for extra in ("agreement", "dropout", "coverage", "entropy")),
    ]
    # The chosen figure alone ranks the test split as the confidences `tfm translate` gives do.
    assert abs(float(sets[0][2]) - rho) <= 0.05
    assert "met on 0 of 1 run(s)" in out or "met on 1 of 1 run(s)" in out

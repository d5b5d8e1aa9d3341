"""bench/multi30k.py's choice of the beam's length penalty on the validation split."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "multi30k.py"


@pytest.fixture
def bench(monkeypatch):
    """The script as a module, its `tfm` calls answered from a table of validation BLEU."""
    spec = importlib.util.spec_from_file_location("bench_multi30k", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.calls = []

    def fake_tfm(*args: str) -> str:
        module.calls.append(args)
        alpha = float(args[args.index("--length-penalty") + 1])
        return json.dumps({"bleu": module.bleu[alpha]})

    monkeypatch.setattr(module, "tfm", fake_tfm)
    return module


def test_best_alpha_is_the_best_validation_bleu_first_on_a_tie(bench):
    options = ["--run", "runs/x", "--json", "--beam-size", "5"]
    bench.bleu = {0.6: 39.4, 1.0: 39.7, 2.0: 39.7, 3.0: 39.1}
    assert bench.best_alpha(options, [0.6, 1.0, 2.0, 3.0]) == 1.0
    assert [call[-3:] for call in bench.calls] == [
        ("validation", "--length-penalty", str(alpha)) for alpha in (0.6, 1.0, 2.0, 3.0)
    ]
    assert all(call[:6] == ("eval", *options) for call in bench.calls)
    bench.bleu = {0.0: 12.0, 5.0: 30.0}
    assert bench.best_alpha(options, [0.0, 5.0]) == 5.0

"""A related pair's own validation split (`data.related[i].validation`) is scored at each
validation beside the main pair's: decoded into its own target language, its BLEU and chrF in
metrics.jsonl and its translations in validations/; a timed plan counts its decoding. The
shared run's `bb` target ends every word with a `z`, so a split decoded into the wrong language
scores near nothing."""

import csv
import json

import torch
import yaml

from tfm.config import Config
from tfm.training.recipe.calibration import Calibration
from tfm.training.recipe.plan import plan_run


def validation_events(run) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [event for event in map(json.loads, lines) if "val_bleu" in event]


def test_each_validation_scores_the_related_pair_in_its_own_language(related_run):
    events = validation_events(related_run)
    assert events
    for event in events:
        assert {"val_bleu/en-bb", "val_chrf/en-bb"} <= set(event)
    last = events[-1]
    assert last["val_chrf/en-bb"] > 60  # decoded into bb: the z's are there
    step = last["step"]
    with (related_run / "validations" / f"step-{step:08d}.en-bb.tsv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert len(rows) == 20
    assert rows[0]["source"] == (related_run.parent / "valid-bb.en").read_text().splitlines()[0]
    words = [word for row in rows for word in row["hypothesis"].split()]
    assert sum(word.endswith("z") for word in words) >= 0.8 * len(words)


def test_a_timed_plan_costs_the_related_validation_with_the_main_one(
    related_run, monkeypatch, tmp_path
):
    decoded = []

    def timed(self, shape, beam_size):
        decoded.append(self.validation())
        return 1.0

    monkeypatch.setattr(Calibration, "_time_validation", timed)
    monkeypatch.setattr(Calibration, "_time_steps", lambda self, shape, max_tokens: 0.01)
    settings = yaml.safe_load((related_run / "config.yaml").read_text(encoding="utf-8"))
    settings["run_dir"] = str(tmp_path / "planned")
    del settings["train"]["max_steps"]  # left to a plan under a time budget
    settings["train"]["max_minutes"] = 1
    config = Config.model_validate(settings)
    _, plan = plan_run(config, device=torch.device("cpu"), dtype=torch.float32)
    assert decoded and "train.max_steps" in plan.reasons
    main = (related_run.parent / "valid.en").read_text(encoding="utf-8").splitlines()
    bb = (related_run.parent / "valid-bb.en").read_text(encoding="utf-8").splitlines()
    assert decoded[0].src_text == main + bb  # both pairs' sentences, as a validation decodes
    assert plan.validation is not None and plan.validation.src_text == main  # validation's own

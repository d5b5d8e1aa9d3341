"""Confidences as scripts read them: `tfm train` leaves a map fitted on its validation split for
its best.pt, `tfm translate --json` and `tfm eval --confidences` give what the map reads off each
translation's figure, a run without a map (an averaged one) says so and gives scores alone until
`tfm calibrate` fits one, an export reads its run's map, and a map is never used for another
model than its own, nor for sampled translations."""

import json

import pytest
from typer.testing import CliRunner

from tfm.cli import app
from tfm.commands.engines import open_translator
from tfm.prediction.confidence import CONFIDENCE_FILE, sentence_chrf
from tfm.prediction.settings import DecodeRequest
from tfm.rundir.manifest import check_manifest

SENTENCES = ["a dog sees a cat", "", "the big bird sleeps"]


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(app, list(args), input=input)


@pytest.fixture(scope="module")
def translator(trained_run):
    return open_translator(DecodeRequest(run=trained_run, device="cpu", threads=1))


def test_training_fits_the_map_for_its_model_on_the_validation_split(trained_run, translator):
    found = json.loads((trained_run / CONFIDENCE_FILE).read_text(encoding="utf-8"))
    fitted = found["fitted"]
    assert fitted["sentences"] == 60 and fitted["decoding"] == {"strategy": "greedy"}
    assert -1 <= fitted["spearman"] <= 1 and 0 < fitted["mean_chrf"] < 100
    check_manifest(trained_run, [CONFIDENCE_FILE])  # listed, and as written
    assert translator.confidence_map is not None
    assert translator.confidence_map.low == found["low"]


def test_translate_json_gives_each_line_its_translation_score_and_confidence(
    trained_run, translator
):
    result = invoke("translate", "--run", str(trained_run), "--json", input="\n".join(SENTENCES))
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    [best] = zip(*translator.rated(SENTENCES), strict=True)
    assert rows == [
        {"source": source, "translation": rating.translation,
         "score": pytest.approx(rating.score, abs=1e-4), "confidence": rating.confidence}
        for source, rating in zip(SENTENCES, best, strict=True)
    ]  # fmt: skip
    # The confidence is the map's reading of the figure of the ids the search found.
    assert rows[0]["confidence"] == translator.confidence_map(best[0].log_prob)
    assert rows[1]["confidence"] is None and all(0 <= rows[i]["confidence"] <= 100 for i in (0, 2))
    assert "confidence is null" not in result.stderr

    listed = invoke("translate", "--run", str(trained_run), "--json", "--n-best", "2",
                    SENTENCES[0])  # fmt: skip
    [row] = [json.loads(line) for line in listed.stdout.splitlines()]
    texts = [h["translation"] for h in row["n_best"]]
    assert row["translation"] == texts[0] and len(texts) == 2
    listed = translator.settings.asking(translator.config.decoding, {}, n_best=2)  # a beam of 2
    [rated] = translator.rated([SENTENCES[0]], 2, settings=listed)
    assert [h["confidence"] for h in row["n_best"]] == [rating.confidence for rating in rated]


def test_eval_writes_each_hypothesis_confidence_figure_and_chrf(trained_run, translator, tmp_path):
    hypotheses, table = tmp_path / "hyp.txt", tmp_path / "confidences.tsv"
    result = invoke("eval", "--run", str(trained_run), "--split", "validation", "--json",
                    "--output", str(hypotheses), "--confidences", str(table))  # fmt: skip
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    header, *rows = [line.split("\t") for line in table.read_text(encoding="utf-8").splitlines()]
    assert header == ["confidence", "log_prob", "chrf"]
    texts = hypotheses.read_text(encoding="utf-8").splitlines()
    assert len(rows) == len(texts) == 60
    src = [line.split("\t")[0] for line in validation_file(trained_run)]
    refs = [line.split("\t")[1] for line in validation_file(trained_run)]
    expected = [rated[0].confidence for rated in translator.rated(src)]
    assert [float(row[0]) for row in rows] == pytest.approx(expected, abs=1e-4)
    assert [float(row[2]) for row in rows] == pytest.approx(sentence_chrf(texts, refs), abs=0.01)
    assert scores["mean_confidence"] == pytest.approx(sum(expected) / 60, abs=1e-3)
    assert -1 <= scores["confidence_spearman"] <= 1 and "confidence_low_tenth_gap" in scores


def validation_file(run):
    """The validation split, as the validation that chose the model kept it: source, reference,
    hypothesis a row."""
    return (run / "validations" / "step-00000200.tsv").read_text(encoding="utf-8").splitlines()[1:]


def test_an_averaged_run_has_no_map_until_calibrate_fits_one(trained_run, tmp_path):
    averaged = tmp_path / "averaged"
    assert invoke("average", "--run", str(trained_run), "--last", "2",
                  "--out", str(averaged)).exit_code == 0  # fmt: skip
    before = invoke("translate", "--run", str(averaged), "--json", SENTENCES[0])
    assert before.exit_code == 0 and json.loads(before.stdout)["confidence"] is None
    assert f"confidence is null: {averaged} has no confidence map" in before.stderr
    assert f"`tfm calibrate --run {averaged}` fits one" in before.stderr
    table = tmp_path / "confidences.tsv"
    unmapped = invoke("eval", "--run", str(averaged), "--json", "--confidences", str(table))
    assert json.loads(unmapped.stdout)["confidence_spearman"] is None
    first = table.read_text(encoding="utf-8").splitlines()[1].split("\t")
    assert first[0] == "" and float(first[1]) < 0  # no confidence; the figure all the same

    fitted = invoke("calibrate", "--run", str(averaged), "--json")
    assert fitted.exit_code == 0, fitted.output
    found = json.loads(fitted.stdout)
    assert found["sentences"] == 60
    assert found["map"] == str(averaged / CONFIDENCE_FILE) and found["seconds"] >= 0
    after = invoke("translate", "--run", str(averaged), "--json", SENTENCES[0])
    assert 0 <= json.loads(after.stdout)["confidence"] <= 100


def test_a_map_is_not_read_for_another_model_nor_an_ensemble(trained_run):
    older = invoke("translate", "--run", str(trained_run), "--json",
                   "--checkpoint", "checkpoints/step-00000100.pt", SENTENCES[0])  # fmt: skip
    assert older.exit_code == 0 and json.loads(older.stdout)["confidence"] is None
    assert "was fitted for another model file than the one decoding" in older.stderr
    both = invoke("translate", "--run", str(trained_run), "--json",
                  "--ensemble", str(trained_run), SENTENCES[0])  # fmt: skip
    assert json.loads(both.stdout)["confidence"] is None
    assert "an ensemble has no confidence map" in both.stderr
    # Sampled translations score lower under the model than the searched ones the map was
    # fitted on, at the same chrF: the map does not read them.
    sampled = invoke("translate", "--run", str(trained_run), "--json", "--strategy", "sampling",
                     "--seed", "1", SENTENCES[0])  # fmt: skip
    assert json.loads(sampled.stdout)["confidence"] is None
    assert "the confidence map reads the translations of greedy search, not those sampling " \
        "finds" in sampled.stderr  # fmt: skip
    beam = invoke("translate", "--run", str(trained_run), "--json", "--beam-size", "3",
                  SENTENCES[0])  # fmt: skip
    assert json.loads(beam.stdout)["confidence"] is not None  # greedy's map reads the beam's


def test_an_export_reads_the_map_of_the_model_it_holds(trained_run, translator, tmp_path):
    pytest.importorskip("ctranslate2")
    from tfm.deploy import export_run

    texts = [t for t in SENTENCES if t]
    expected = [rated[0].confidence for rated in translator.rated(texts)]
    for quantization, within in (("none", 0.01), ("int8", 5.0)):  # int8 moves figures a little
        folder = tmp_path / quantization
        export_run(trained_run, folder, quantization=quantization)
        exported = open_translator(DecodeRequest(run=folder, threads=1))
        found = [rated[0].confidence for rated in exported.rated(texts)]
        assert found == pytest.approx(expected, abs=within), quantization
    result = invoke("calibrate", "--run", str(tmp_path / "none"))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("tfm: error: ") and len(result.stderr.splitlines()) == 1
    assert "calibrate that tfm run, then export it again" in result.stderr

    averaged = tmp_path / "averaged"  # no map: its export has none either, and says why
    invoke("average", "--run", str(trained_run), "--last", "2", "--out", str(averaged))
    export_run(averaged, tmp_path / "unmapped")
    unmapped = invoke("translate", "--run", str(tmp_path / "unmapped"), "--json", texts[0])
    assert json.loads(unmapped.stdout)["confidence"] is None
    assert "has no confidence map: its run had none for the model exported" in unmapped.stderr

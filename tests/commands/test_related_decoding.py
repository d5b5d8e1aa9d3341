"""A model trained into several languages (`data.related`, one-to-many) translates into the one
asked for: the main pair's target by default, another with `--tgt-lang` (translate, eval, the
CTranslate2 export, the server), and a language it was not trained for is one line naming those
it was. The shared run's made-up targets make the language visible in every word: capitals for
`aa`, a `z` at the end for `bb`."""

import json

import pytest
from typer.testing import CliRunner

from tfm.cli import app
from tfm.commands.engines import open_translator
from tfm.prediction.settings import DecodeRequest

SOURCES = ["cat dog sun", "big red tree", "one old moon"]


def words(lines: list[str]) -> list[str]:
    return [word for line in lines for word in line.split()]


def translated(run, *options: str) -> list[str]:
    result = CliRunner().invoke(app, ["translate", "--run", str(run), *options, *SOURCES])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_translate_goes_into_the_main_target_by_default_and_the_one_asked_for(related_run):
    main, other = translated(related_run), translated(related_run, "--tgt-lang", "bb")
    assert sum(w.isupper() for w in words(main)) >= 0.8 * len(words(main))
    assert sum(w.islower() and w.endswith("z") for w in words(other)) >= 0.8 * len(words(other))
    assert translated(related_run, "--tgt-lang", "aa") == main


def test_a_language_the_model_was_not_trained_for_is_one_line(related_run):
    result = CliRunner().invoke(app, ["translate", "--run", str(related_run), "--tgt-lang", "de",
                                      "cat"])  # fmt: skip
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "--tgt-lang de: the model was trained to translate into aa, bb, not de" in result.output


def test_eval_scores_the_files_of_another_target_in_its_language(related_run):
    folder = related_run.parent
    args = ["eval", "--run", str(related_run), "--src", str(folder / "test-bb.en"),
            "--ref", str(folder / "test-bb.bb"), "--json"]  # fmt: skip
    asked = CliRunner().invoke(app, [*args, "--tgt-lang", "bb"])
    default = CliRunner().invoke(app, args)
    assert asked.exit_code == 0 and default.exit_code == 0, asked.output + default.output
    # the references are bb: asked for bb it scores well, by default (aa, capitals) it cannot
    assert json.loads(asked.stdout)["chrf"] > 60 > 20 > json.loads(default.stdout)["chrf"]
    split = CliRunner().invoke(app, ["eval", "--run", str(related_run), "--tgt-lang", "bb"])
    assert split.exit_code != 0
    assert "the run's test split is en→aa; score another target language with --src" in (
        split.output
    )


def test_the_export_keeps_the_tags_and_translates_as_tfm_does(related_run, tmp_path):
    pytest.importorskip("ctranslate2")
    from tfm.deploy import export_run

    export_run(related_run, tmp_path / "export")
    assert (tmp_path / "export" / "plan.json").is_file()  # the languages it was trained into
    for lang in (None, "bb"):
        ours = open_translator(DecodeRequest(run=related_run, device="cpu", threads=1,
                                             tgt_lang=lang))  # fmt: skip
        theirs = open_translator(DecodeRequest(run=tmp_path / "export", threads=1,
                                               tgt_lang=lang))  # fmt: skip
        assert theirs.translate(SOURCES) == ours.translate(SOURCES)
    bb = words(theirs.translate(SOURCES))
    assert sum(w.endswith("z") for w in bb) >= 0.8 * len(bb)


def test_the_run_s_plan_keeps_the_mix_it_trained_on(related_run):
    mix = json.loads((related_run / "plan.json").read_text(encoding="utf-8"))["mix"]
    assert mix["main_share"] == 0.5 and mix["notes"] == []
    # the related pairs less those with an English sentence of the main validation or test
    folder = related_run.parent
    held = {line for name in ("valid", "test") for line in lines(folder / f"{name}.en")}
    kept = sum(line not in held for line in lines(folder / "bb.en"))
    assert 0 < 400 - kept  # the made-up sentences repeat: some are left out
    assert [(c["key"], c["tgt_lang"], c["pairs"], c["times"]) for c in mix["corpora"]] == [
        ("data.train", "aa", 400, 1), ("data.related[0]", "bb", kept, 1)]  # fmt: skip


def lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_a_language_whose_corpus_was_left_out_is_not_offered(related_run, tmp_path):
    import shutil

    from tfm.serve.request_limits import ServeLimits
    from tfm.serve.server_info import server_info

    run = tmp_path / "run"
    shutil.copytree(related_run, run)
    plan = json.loads((run / "plan.json").read_text(encoding="utf-8"))
    plan["mix"]["corpora"][1]["times"] = 0  # as the plan leaves out a corpus in another script
    (run / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    result = CliRunner().invoke(app, ["translate", "--run", str(run), "--tgt-lang", "bb", "cat"])
    assert result.exit_code != 0
    assert "--tgt-lang bb: the model was trained to translate into aa, not bb" in result.output
    translator = open_translator(DecodeRequest(run=run, device="cpu", threads=1))
    assert translator.tgt_langs == ("aa",)
    assert server_info(translator, ServeLimits(), auth=False)["tgt_langs"] == ["aa"]

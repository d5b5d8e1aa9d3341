"""The tfm command as scripts use it: outputs, exit codes and one-line errors.

The eval and translate tests read the session's trained run (tests/conftest.py), remembered as
the last run trained from this module's working folder; reranking borrows the run trained both
ways as its reverse model. The error tests need no model.
"""

import json
import re
from pathlib import Path

import pytest
import torch
from builders import TRAINED, metric_events, tiny_config
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from tiny_models import best_ids, decode_settings
from typer.testing import CliRunner

from tfm.cli import app
from tfm.prediction.confidence import REPORT_KEYS
from tfm.rundir.paths import remember_run


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(app, list(args), input=input)


def without_timing(scores: dict) -> dict:
    """`tfm eval --json`'s scores without the decoding time, which differs from run to run."""
    return {k: v for k, v in scores.items() if k not in ("decode_seconds", "sentences_per_second")}


@pytest.fixture(scope="module")
def workdir(trained_run, tmp_path_factory):
    """This module's working folder, from which `trained_run` was (as far as tfm knows) the last
    run trained: `tfm eval` and `tfm translate` without --run use it."""
    path = tmp_path_factory.mktemp("cli")
    remember_run(trained_run, cwd=path)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(path)
        yield path


def test_train_prints_the_run_dir_and_leaves_everything_needed(trained_run, trained_run_output):
    assert trained_run_output["stdout"].strip() == str(trained_run)
    for name in ("config.yaml", "tokenizer.json", "best.pt", "last.pt", "metrics.jsonl"):
        assert (trained_run / name).is_file(), name
    train_events = metric_events(trained_run, "train_loss")
    val_events = metric_events(trained_run, "val_loss")
    assert [e["step"] for e in train_events] == list(range(25, 201, 25))
    assert [e["step"] for e in val_events] == [100, 200]
    assert all({"lr", "tokens_per_s", "peak_mib"} <= e.keys() for e in train_events)
    peaks = [e["peak_mib"] for e in train_events]  # the process's peak RSS: it only grows
    assert peaks == sorted(peaks)
    assert 50 < peaks[-1] <= trained_run_output["peak_mib"] + 1
    stderr = trained_run_output["stderr"]
    done = re.search(r"done: 200 steps .*; peak memory (\d+) MiB", stderr)
    assert done and int(done.group(1)) >= peaks[-1]
    assert all({"val_bleu", "val_chrf"} <= e.keys() for e in val_events)
    # The brevity the validation BLEU pays for, in the log and in metrics.jsonl alike.
    ratios = [e["val_length_ratio"] for e in val_events]
    assert all(0 < r < 5 for r in ratios), ratios
    logged = re.findall(r"step (\d+) validation: .*, length ratio ([\d.]+)", stderr)
    assert [(int(step), float(r)) for step, r in logged] == [(100, ratios[0]), (200, ratios[1])]
    assert train_events[-1]["train_loss"] < train_events[0]["train_loss"] - 1.0


def test_eval_json_is_one_object_and_the_model_learned(workdir):
    threads = torch.get_num_threads()
    try:
        result = invoke("eval", "--json", "--split", "validation", "--threads", "2")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert {"bleu", "bleu_signature", "bleu_lowercase", "chrf", "loss", "perplexity"} <= set(scores)
    # How long decoding took (scoring and the loss left out), and its rate.
    assert 0 < scores["decode_seconds"] < 600
    seconds = scores["decode_seconds"]  # to the millisecond: the rate is known that well
    rate = scores["sentences"] / seconds
    assert scores["sentences_per_second"] == pytest.approx(rate, rel=0.0006 / seconds, abs=0.1)
    n_validation = TRAINED["data"]["toy"]["n_validation"]
    assert scores["split"] == "validation" and scores["sentences"] == n_validation
    assert scores["bleu_signature"].startswith("nrefs:1|case:mixed")
    assert "|tok:13a|" in scores["bleu_signature"] and scores["headline"] == "bleu"  # German
    # An untrained model of this size scores near 0 BLEU; a learned one far above it.
    assert scores["bleu"] > 15, scores


def test_eval_writes_hypotheses_in_input_order(workdir):
    src = workdir / "src.txt"
    ref = workdir / "ref.txt"
    src.write_text("i see the dog\nthe big dog sees the small cat\n", encoding="utf-8")
    ref.write_text("Ich sehe den Hund\nDer große Hund sieht die kleine Katze\n", encoding="utf-8")
    out = workdir / "hyp.txt"
    result = invoke("eval", "--src", str(src), "--ref", str(ref), "--output", str(out), "--json")
    assert result.exit_code == 0, result.output
    hyps = out.read_text(encoding="utf-8").split("\n")
    assert len(hyps) == 3 and hyps[2] == ""
    # The brevity penalty's lengths count sacreBLEU's 13a tokens: 4 + 7 in the references.
    scores = json.loads(result.stdout)
    assert scores["ref_len"] == 11
    assert scores["hyp_len"] == sum(len(Tokenizer13a()(h).split()) for h in hyps[:2])
    assert scores["length_ratio"] == round(scores["hyp_len"] / 11, 4)
    text = invoke("eval", "--src", str(src), "--ref", str(ref)).stdout.splitlines()
    assert f"length_ratio     {scores['length_ratio']}" in text
    single = invoke("translate", "the big dog sees the small cat").stdout.strip()
    assert hyps[1] == single


def test_translate_prints_one_line_per_sentence(workdir):
    result = invoke("translate", "i see the dog", "the big dog sees the small cat")
    assert result.exit_code == 0, result.output
    lines = result.stdout.split("\n")
    assert len(lines) == 3 and lines[2] == "" and all(lines[:2])
    assert re.search(r"translated 2 line\(s\) in [\d.]+ s \([\d.]+ sentences/s\)", result.stderr)


def test_translate_stdin_keeps_empty_lines_and_order(workdir):
    text = "i see the dog\n\nthe big dog sees the small cat\n"
    result = invoke("translate", input=text)
    assert result.exit_code == 0, result.output
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == 3 and lines[1] == ""
    separately = [invoke("translate", s).stdout.strip() for s in ("i see the dog",)]
    assert lines[0] == separately[0]


def test_the_same_command_twice_trains_once_and_another_config_is_refused(copy_of_trained_run):
    config = str(copy_of_trained_run / "config.yaml")
    best = (copy_of_trained_run / "best.pt").stat().st_mtime_ns
    again = invoke("train", "--config", config, "--no-progress", "--threads", "1")
    assert again.exit_code == 0, again.output
    assert again.stdout.strip() == str(copy_of_trained_run)
    assert "already trained with this config (200 steps, stopped by train.max_steps); use " \
        "--resume to train further or --overwrite to start again" in again.stderr  # fmt: skip
    assert (copy_of_trained_run / "best.pt").stat().st_mtime_ns == best
    longer = invoke("train", "--config", config, "--no-progress", "--set", "train.max_steps=300")
    assert longer.exit_code == 2
    assert "already exists; use --resume" in longer.stderr
    assert "Traceback" not in longer.output


def one_line_error(result, code: int, *fragments: str) -> None:
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("tfm: error: ")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def test_translate_before_any_training_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line_error(invoke("translate", "hello"), 2, "tfm train")
    one_line_error(invoke("eval", "--run", "nowhere"), 2, "nowhere", "does not exist")


def test_config_errors_exit_2_naming_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  max_step: 3\n", encoding="utf-8")
    one_line_error(invoke("train", "--config", str(bad)), 2, "did you mean 'max_steps'")
    one_line_error(invoke("train", "--config", str(tmp_path / "no.yaml")), 2, "does not exist")
    result = invoke("train", "--config", str(bad), "--set", "train.max_steps=x")
    assert result.exit_code == 2 and "train.max_steps" in result.stderr


def test_missing_data_file_names_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("data:\n  train: {format: text, path: nothere/train}\n", encoding="utf-8")
    result = invoke("train", "--config", str(cfg), "--no-progress")
    one_line_error(result, 2, "nothere/train")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_asking_for_cuda_without_one_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("train: {max_steps: 1}\n", encoding="utf-8")
    one_line_error(invoke("train", "--config", str(cfg), "--device", "cuda"), 2, "cuda")


def test_usage_mistakes_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line_error(invoke("eval", "--src", "a.txt"), 2, "--src and --ref go together")
    assert invoke("train").exit_code == 2  # --config is required (Typer's own usage error)
    one_line_error(invoke("translate", "--file", "missing.txt", "--run", "."), 2, "missing.txt")


def test_translate_refuses_a_tokenizer_that_is_not_the_models(copy_of_trained_run):
    from tfm.data.tokenizer import train_tokenizer

    run = copy_of_trained_run
    other = train_tokenizer(["a b c d", "e f g"], ["h i j", "k l"], vocab_size=400, min_frequency=1)
    other.save(run)
    result = invoke("translate", "--run", str(run), "i see the dog")
    one_line_error(result, 1, "does not match", str(run))


def test_beam_size_one_is_greedy_and_a_wider_beam_scores_its_width(workdir):
    sentences = ["i see the dog", "the big dog sees the small cat", "we hope that he sleeps"]
    greedy = invoke("translate", *sentences).stdout
    assert invoke("translate", "--beam-size", "1", *sentences).stdout == greedy
    beam = invoke("translate", "--beam-size", "4", *sentences)
    assert beam.exit_code == 0, beam.output
    assert len(beam.stdout.split("\n")) == len(sentences) + 1
    scores = json.loads(invoke("eval", "--json", "--beam-size", "3").stdout)
    assert scores["strategy"] == "beam" and scores["beam_size"] == 3 and scores["sentences"] == 60
    assert json.loads(invoke("eval", "--json").stdout)["strategy"] == "greedy"  # the config's
    zero = invoke("eval", "--beam-size", "0")
    one_line_error(zero, 2, "--beam-size 0: expected an integer from 1 to 1000")


def test_length_penalty_option_overrides_the_config(workdir):
    sentences = ["i see the dog", "the big dog sees the small cat", "we hope that he sleeps"]
    default = invoke("translate", "--beam-size", "4", *sentences).stdout
    same = invoke("translate", "--beam-size", "4", "--length-penalty", "0.6", *sentences)
    assert same.stdout == default  # 0.6 is the config's alpha (the default)
    # The largest alpha (10) makes an extra token worth more than most losses of log-probability:
    # longer output than the config's alpha gives.
    longer = invoke("translate", "--beam-size", "4", "--length-penalty", "10", *sentences)
    assert longer.exit_code == 0, longer.output
    assert len(longer.stdout.split()) > len(default.split())
    ratios = {}
    for alpha in ("0.6", "10"):
        scores = json.loads(
            invoke("eval", "--json", "--beam-size", "2", "--length-penalty", alpha).stdout
        )
        assert scores["length_penalty"] == float(alpha) and scores["beam_size"] == 2
        ratios[alpha] = scores["length_ratio"]
    assert ratios["10"] > ratios["0.6"]  # eval's length ratio shows the longer output too
    beam = json.loads(invoke("eval", "--json", "--strategy", "beam").stdout)
    assert (beam["beam_size"], beam["length_penalty"]) == (5, 0.6)  # the config's
    alone = invoke("translate", "--length-penalty", "10", *sentences)  # chooses the beam, of 5
    assert alone.stdout == invoke("translate", "--beam-size", "5", "--length-penalty", "10",
                                  *sentences).stdout  # fmt: skip
    greedy = invoke("translate", "--strategy", "greedy", "--length-penalty", "10", "x")
    one_line_error(greedy, 2, "--length-penalty is a setting of beam; --strategy greedy does not")
    assert invoke("translate", "--length-penalty", "-1", "x").exit_code == 2


def nbest_rows(stdout: str) -> list[tuple[int, float, str]]:
    rows = [line.split("\t") for line in stdout.split("\n")[:-1]]
    assert all(len(row) == 3 for row in rows), stdout
    return [(int(number), float(score), text) for number, score, text in rows]


def test_n_best_prints_each_sentences_best_hypotheses_with_their_scores(workdir):
    from tfm.data.tokenizer import EOS_ID
    from tfm.prediction.translate import search_ids
    from tfm.rundir.model_file import load_trained
    from tfm.rundir.paths import find_run

    sentences = ["i see the dog", "", "the big dog sees the small cat"]
    result = invoke("translate", "--n-best", "3", "--beam-size", "4", input="\n".join(sentences))
    assert result.exit_code == 0, result.output
    rows = nbest_rows(result.stdout)
    assert [number for number, _, _ in rows] == [1, 1, 1, 2, 3, 3, 3]
    assert rows[3] == (2, 0.0, "")  # a blank line: one empty translation, certain
    for first in (0, 4):
        scores = [score for _, score, _ in rows[first : first + 3]]
        assert scores == sorted(scores, reverse=True) and scores[0] < 0
        assert len({text for _, _, text in rows[first : first + 3]}) == 3
    one_best = invoke("translate", "--beam-size", "4", sentences[0], sentences[2]).stdout
    assert one_best == f"{rows[0][2]}\n{rows[4][2]}\n"
    # The same hypotheses and scores as the library's beam search on the saved model: the
    # first three distinct texts of the whole beam.
    trained_model = load_trained(find_run(None), torch.device("cpu"))
    tokenizer = trained_model.tokenizer
    sources = [ids + [EOS_ID] for ids in tokenizer.encode_src([sentences[0], sentences[2]])]
    settings = decode_settings({"max_len_b": 5}, beam_size=4)
    found = search_ids(trained_model.model, sources, settings, n_best=4)
    expected = []
    for hypotheses in found:
        texts = tokenizer.decode_tgt([h.tokens for h in hypotheses])
        firsts = dict(reversed(list(zip(texts, [h.score for h in hypotheses], strict=True))))
        expected += sorted(firsts.items(), key=lambda pair: -pair[1])[:3]
    assert [text for _, _, text in rows[:3] + rows[4:]] == [text for text, _ in expected]
    printed = [score for _, score, _ in rows[:3] + rows[4:]]
    assert printed == pytest.approx([score for _, score in expected], abs=5e-5)


def test_n_best_widens_the_beam_to_n_unless_a_narrower_one_is_asked_for(workdir):
    sentence = "the big dog sees the small cat"
    rows = nbest_rows(invoke("translate", "--n-best", "3", sentence).stdout)  # config: greedy
    assert len(rows) == 3
    assert rows[0][2] == invoke("translate", "--beam-size", "3", sentence).stdout.strip()
    wide = nbest_rows(invoke("translate", "--n-best", "7", sentence).stdout)
    assert len(wide) == 7  # a beam wider than the config's 5
    greedy = nbest_rows(invoke("translate", "--n-best", "1", sentence).stdout)
    assert [text for _, _, text in greedy] == [invoke("translate", sentence).stdout.strip()]
    narrow = invoke("translate", "--n-best", "3", "--beam-size", "2", sentence)
    one_line_error(narrow, 2, "--n-best 3 needs --beam-size 3 or more, not 2")
    asked_greedy = invoke("translate", "--n-best", "3", "--strategy", "greedy", sentence)
    one_line_error(asked_greedy, 2, "--n-best 3: greedy search finds one translation")
    assert invoke("translate", "--n-best", "0", sentence).exit_code == 2


def noisy_copy(run: Path, to: Path) -> Path:
    """A copy of `run` whose model weights are moved by noise: another model that reads and
    writes the same tokens (an ensemble member that disagrees with the original now and then)."""
    import shutil

    from tfm.rundir.model_file import load_model_file, save_weights

    shutil.copytree(run, to)
    state = load_model_file(to / "best.pt")
    generator = torch.Generator().manual_seed(0)
    noisy = {name: t + 0.2 * t.std() * torch.randn(t.shape, generator=generator)
             for name, t in state["model"].items()}  # fmt: skip
    save_weights(to / "best.pt", noisy, state["model_args"], step=state["step"],
                 tokenizer_fingerprint=state["tokenizer_fingerprint"])  # fmt: skip
    return to


def test_ensemble_decodes_with_the_mean_of_the_runs_probabilities(workdir, trained_run, tmp_path):
    from tfm.data.tokenizer import EOS_ID
    from tfm.prediction.ensemble import Ensemble
    from tfm.prediction.translate import search_ids
    from tfm.rundir.model_file import load_trained
    from tfm.rundir.paths import RunPaths

    run = trained_run
    other = noisy_copy(run, tmp_path / "noisy")
    sentences = ["i see the dog", "the big dog sees the small cat", "we hope that he sleeps"]
    for beam in ("1", "3"):
        result = invoke("translate", "--ensemble", str(other), "--beam-size", beam, *sentences)
        assert result.exit_code == 0, result.output
        assert "decoding with an ensemble of 2 models" in result.stderr
        models = [load_trained(RunPaths(path), torch.device("cpu")) for path in (run, other)]
        tokenizer = models[0].tokenizer
        sources = [ids + [EOS_ID] for ids in tokenizer.encode_src(sentences)]
        settings = decode_settings({"max_len_b": 5}, beam_size=int(beam))
        expected = best_ids(Ensemble([m.model for m in models]), sources, settings)
        assert result.stdout == "".join(t + "\n" for t in tokenizer.decode_tgt(expected))
    # --n-best goes through the same ensemble: the ensemble's beam hypotheses and scores.
    nbest = invoke("translate", "--ensemble", str(other), "--beam-size", "3", "--n-best", "2",
                   *sentences)  # fmt: skip
    found = search_ids(Ensemble([m.model for m in models]), sources, settings, n_best=2)
    rows = nbest_rows(nbest.stdout)
    assert [text for _, _, text in rows[::2]] == result.stdout.split("\n")[:-1]
    expected_scores = [h.score for hypotheses in found for h in hypotheses[:2]]
    assert [score for _, score, _ in rows] == pytest.approx(expected_scores, abs=5e-5)
    # The same run twice is the run alone; eval names the ensemble in its JSON.
    alone = json.loads(invoke("eval", "--json").stdout)
    twice = json.loads(invoke("eval", "--json", "--ensemble", str(run)).stdout)
    assert twice.pop("ensemble") == [str(run)]
    assert twice.pop("loss") == pytest.approx(alone.pop("loss"), abs=1e-3)
    twice.pop("perplexity"), alone.pop("perplexity")
    assert all(twice.pop(key) is None for key in REPORT_KEYS)  # an ensemble has no confidence map
    assert all(alone.pop(key) is not None for key in REPORT_KEYS)  # the run alone has one
    assert without_timing(twice) == without_timing(alone)


def test_ensemble_refuses_a_run_with_another_tokenizer(workdir, trained_run, tmp_path):
    from tfm.training import train

    other = tmp_path / "other"  # a run of its own, with a 150-token vocabulary, not ours
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)  # so that it is not remembered as the run last trained in workdir
        train(tiny_config(other, max_steps=1, validate_every=1), progress_bar=False)
    run = str(trained_run)
    result = invoke("translate", "--run", run, "--ensemble", str(other), "i see the dog")
    one_line_error(result, 2, f"--ensemble {other}: its tokenizer differs", "share one tokenizer")
    missing = invoke("eval", "--ensemble", str(tmp_path / "nowhere"))
    one_line_error(missing, 2, "nowhere")


def test_eval_of_empty_files_is_a_one_line_error(workdir):
    empty = workdir / "empty.txt"
    empty.write_text("", encoding="utf-8")
    result = invoke("eval", "--src", str(empty), "--ref", str(empty))
    one_line_error(result, 2, str(empty), "no sentences")


def test_eval_names_unaligned_files_before_it_loads_the_model(workdir, trained_run):
    src, ref = workdir / "src.txt", workdir / "ref.txt"
    src.write_text("i see the dog\nthe cat\n", encoding="utf-8")
    ref.write_text("ich sehe den hund\n", encoding="utf-8")
    result = invoke("eval", "--run", str(trained_run), "--src", str(src), "--ref", str(ref))
    one_line_error(result, 2, f"{src} has 2 lines but {ref} has 1")
    assert len(result.stderr.splitlines()) == 1, result.stderr  # no line about a loaded model


def test_rerank_with_a_reverse_run_rescores_the_whole_beam(workdir, both_ways_run):
    from tfm.data.pipeline import prepare_splits
    from tfm.prediction.reranking import Reranker
    from tfm.prediction.translate import search_ids
    from tfm.rundir.model_file import load_trained
    from tfm.rundir.paths import find_run

    flags = ["--split", "test", "--rerank-with", str(both_ways_run)]
    result = invoke("eval", "--json", *flags, "--rerank-weight", "0.7", "--output", "hyp.txt")
    assert result.exit_code == 0, result.output
    assert "reranking the beam with 1 reverse model(s), weight 0.7" in result.stderr
    scores = json.loads(result.stdout)
    assert scores["rerank_with"] == [str(both_ways_run)] and scores["rerank_weight"] == 0.7
    assert scores["beam_size"] == 5  # the config says greedy: reranking needs a beam, 5 at least
    # The same by hand: the forward model's beam of 5, reranked by the reverse model.
    forward = load_trained(find_run(None), torch.device("cpu"))
    reverse = load_trained(find_run(both_ways_run), torch.device("cpu"))
    splits, _ = prepare_splits(forward.config.data, forward.config.tokenizer, ("test",),
                               tokenizer=forward.tokenizer)  # fmt: skip
    test = splits["test"]
    found = search_ids(forward.model, test.src, decode_settings({"max_len_b": 5}, beam_size=5))
    nbest = [[(forward.tokenizer.decode_tgt([h.tokens])[0], h.score) for h in beam]
             for beam in found]  # fmt: skip
    reranker = Reranker(reverse.model, reverse.tokenizer, decode_settings(), weight=0.7)
    expected = [ranked[0][0] for ranked in reranker.rerank(test.src_text, nbest)]
    assert Path("hyp.txt").read_text(encoding="utf-8") == "".join(h + "\n" for h in expected)
    changed = sum(h != beam[0][0] for h, beam in zip(expected, nbest, strict=True))
    assert changed > 0  # the reverse model disagrees with the beam somewhere: a real test
    # Weight 0 keeps the beam's order: the same scores as plain beam search of that width.
    zero = json.loads(invoke("eval", "--json", *flags, "--rerank-weight", "0").stdout)
    plain = json.loads(invoke("eval", "--json", "--split", "test", "--beam-size", "5").stdout)
    assert zero.pop("rerank_with") and zero.pop("rerank_weight") == 0.0
    assert without_timing(zero) == without_timing(plain)


def test_translate_reranks_the_n_best_list(workdir, both_ways_run):
    sentences = ["i see the dog", "the big dog sees the small cat", "we hope that he sleeps"]
    rerank = ["--rerank-with", str(both_ways_run), "--beam-size", "4"]
    best = invoke("translate", *rerank, *sentences)
    nbest = invoke("translate", *rerank, "--n-best", "3", *sentences)
    assert best.exit_code == nbest.exit_code == 0, best.output + nbest.output
    rows = nbest_rows(nbest.stdout)
    assert [number for number, _, _ in rows] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert [text for _, _, text in rows[::3]] == best.stdout.split("\n")[:-1]
    for start in (0, 3, 6):  # best first by the combined score
        sentence_scores = [score for _, score, _ in rows[start : start + 3]]
        assert sentence_scores == sorted(sentence_scores, reverse=True)
    # Reverse runs given twice are an ensemble of one model: the same reranking.
    twice = invoke("translate", *rerank, "--rerank-with", str(both_ways_run), "--n-best", "3",
                   *sentences)  # fmt: skip
    assert twice.exit_code == 0, twice.output
    assert [text for _, _, text in nbest_rows(twice.stdout)] == [text for _, _, text in rows]
    assert [score for _, score, _ in nbest_rows(twice.stdout)] == pytest.approx(
        [score for _, score, _ in rows], abs=2e-4
    )


def test_rerank_errors_name_the_option_and_what_it_needs(workdir, trained_run, both_ways_run):
    run = str(trained_run)
    wrong_way = invoke("eval", "--rerank-with", run)
    one_line_error(wrong_way, 2, f"--rerank-with {run}: it translates en→de",
                   "needs a run trained de→en")  # fmt: skip
    alone = invoke("translate", "--rerank-weight", "0.5", "i see the dog")
    one_line_error(alone, 2, "--rerank-weight needs --rerank-with")
    greedy = invoke("translate", "--rerank-with", str(both_ways_run), "--beam-size", "1", "a dog")
    one_line_error(greedy, 2, "--rerank-with reranks a beam: give --beam-size 2 or more")
    sampled = invoke("translate", "--rerank-with", str(both_ways_run), "--top-p", "0.9", "a dog")
    one_line_error(sampled, 2, "--rerank-with reranks a beam: give --strategy beam")
    negative = invoke("eval", "--rerank-with", str(both_ways_run), "--rerank-weight", "-1")
    assert negative.exit_code == 2 and "Traceback" not in negative.output

"""The Translator: settings resolved once and asked for per call, n-best lists of distinct texts,
seeded samples that repeat, and `--checkpoint` for when best.pt is bad."""

import matplotlib.image
import pytest
from tiny_models import decode_settings
from typer.testing import CliRunner

from tfm.cli import app
from tfm.commands.engines import open_translator
from tfm.errors import UsageError
from tfm.prediction.settings import DecodeRequest
from tfm.prediction.strategies import BeamSearch, GreedySearch, Sampling
from tfm.prediction.translator import Translator

SENTENCES = ["i see the dog", "the big dog sees the small cat", "we hope that he sleeps"]
PIECES = {1: "a", 2: "b", 3: "ab", 4: "c", 5: "d"}


class Pieces:
    """A tokenizer of single characters whose output pieces 1 2 and 3 both read "ab"."""

    def encode_src(self, texts, *, tag=None):
        assert tag is None  # a model of one target language
        return [[ord(c) for c in text] for text in texts]

    def decode_tgt(self, ids):
        return ["".join(PIECES[i] for i in seq) for seq in ids]


class FixedBeam(Translator):
    """An engine whose beam is always the same four hypotheses, two of them the same text."""

    engine = "fixed"

    def __init__(self, beam_size: int) -> None:
        self.tokenizer = Pieces()  # type: ignore[assignment]
        self.settings = decode_settings(beam_size=beam_size)
        self.step = None

    def search(self, sources, settings, numbers, *, n_best, scored):
        beam = [([1, 2], -0.1), ([3], -0.2), ([4], -0.3), ([5], -0.4)]
        return [beam[: settings.strategy.hypotheses(n_best)] for _ in sources]


def test_n_best_lists_distinct_texts_filled_from_the_rest_of_the_beam():
    translator = FixedBeam(beam_size=4)
    found = translator.nbest(["x", " ", "y"], 3)
    assert found[0] == found[2] == [("ab", -0.1), ("c", -0.3), ("d", -0.4)]
    assert found[1] == [("", 0.0)]  # a blank line: one empty translation, certain
    narrow = decode_settings(beam_size=2)  # the whole beam holds one text
    assert translator.nbest(["x"], 2, settings=narrow) == [[("ab", -0.1)]]
    with pytest.raises(UsageError, match="--n-best 3 needs --beam-size 3 or more, not 2"):
        translator.nbest(["x"], 3, settings=narrow)
    assert translator.translate(["x", "", "y"]) == ["ab", "", "ab"]


def test_opened_settings_and_settings_asked_per_call(trained_run):
    own = open_translator(DecodeRequest(run=trained_run, device="cpu"))
    assert (own.engine, own.settings.strategy) == ("torch", GreedySearch())
    assert own.step == 200 and own.config.decoding.max_len_b == 5
    three = open_translator(DecodeRequest(run=trained_run, n_best=3)).settings.strategy
    assert three == BeamSearch(beam_size=5, length_penalty=0.6)  # the config's beam holds 3
    asked = {"beam_size": 4, "length_penalty": 1.5}
    wide = open_translator(DecodeRequest(run=trained_run, search=asked))
    per_call = own.settings.asking(own.config.decoding, asked)
    assert per_call == wide.settings
    assert own.translate(SENTENCES, settings=per_call) == wide.translate(SENTENCES)
    assert own.nbest(SENTENCES, 3, settings=per_call) == wide.nbest(SENTENCES, 3)
    with pytest.raises(UsageError, match="greedy search finds one translation"):
        own.nbest(SENTENCES, 3)  # its own search is greedy: the settings were not changed
    assert [len(found) for found in wide.nbest(SENTENCES, 4)] == [4, 4, 4]


def test_a_seeded_sampling_translator_repeats_itself_and_its_samples_are_lists(trained_run):
    request = DecodeRequest(run=trained_run, search={"temperature": 1.5, "seed": 11})
    translator = open_translator(request)
    assert translator.settings.strategy == Sampling(temperature=1.5, top_k=0, top_p=1.0, seed=11)
    first = translator.nbest(SENTENCES, 4)
    assert translator.nbest(SENTENCES, 4) == first
    assert translator.translate(SENTENCES) == translator.translate(SENTENCES)
    assert max(len(found) for found in first) > 1  # samples differ
    other = translator.settings.asking(translator.config.decoding, {"seed": 12})
    assert translator.nbest(SENTENCES, 4, settings=other) != first
    unseeded = translator.settings.asking(translator.config.decoding, {"seed": None})
    assert unseeded.strategy.seed == 11  # None is not asked: the translator's seed stays


def invoke(*args) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    return result.exit_code, result.stdout, result.stderr


def test_checkpoint_decodes_with_a_model_file_of_the_run(copy_of_trained_run):
    run = copy_of_trained_run
    checkpoints = run / "checkpoints"
    step_200, step_100 = checkpoints / "step-00000200.pt", "checkpoints/step-00000100.pt"
    (run / "best.pt").rename(run / "old-best.pt")  # so that the run decodes with last.pt
    code, last, _ = invoke("translate", "--run", run, *SENTENCES)
    assert code == 0 and len(last.splitlines()) == 3
    code, out, err = invoke("translate", "--run", run, "--checkpoint", step_200, *SENTENCES)
    assert (code, out) == (0, last), err  # the same weights as last.pt
    code, out, err = invoke("eval", "--run", run, "--checkpoint", step_100, "--json")
    assert code == 0 and '"step": 100' in out, err  # relative to the run directory
    code, _, err = invoke("translate", "--run", run, "--checkpoint", "nope.pt", "a dog")
    assert code == 2
    assert err.splitlines()[-1] == f"tfm: error: --checkpoint nope.pt: no such file (nor in {run})"


def test_a_corrupt_best_pt_advises_checkpoint_which_then_works(copy_of_trained_run):
    run = copy_of_trained_run
    best = run / "best.pt"
    best.write_bytes(best.read_bytes()[: best.stat().st_size // 2])
    code, _, err = invoke("translate", "--run", run, "a dog")
    assert code == 1 and err.count("tfm: error:") == 1
    assert f"tfm: error: checkpoint {best} is truncated or corrupted" in err
    newest = run / "checkpoints" / "step-00000200.pt"
    advice = f"give --checkpoint FILE, one of the run's checkpoints in {run / 'checkpoints'}"
    assert err.endswith(f"; {advice} (newest: {newest})\n")
    code, out, err = invoke("translate", "--run", run, "--checkpoint", newest, "a dog")
    assert code == 0 and out.strip() != "", err


def test_attention_draws_the_model_of_checkpoint_where_best_pt_is_corrupt(
    copy_of_trained_run, tmp_path
):
    """`tfm attention` takes --checkpoint as eval and translate do, so the advice for a corrupt
    best.pt holds for it too; each checkpoint's picture is its own model's."""
    run = copy_of_trained_run
    best = run / "best.pt"
    best.write_bytes(best.read_bytes()[: best.stat().st_size // 2])
    out = tmp_path / "cross.png"
    code, _, err = invoke("attention", "--run", run, "--out", out, "a dog")
    assert code == 1 and "give --checkpoint FILE" in err and not out.exists()
    pictures = []
    for step in (100, 200):
        out = tmp_path / f"cross-{step}.png"
        checkpoint = f"checkpoints/step-{step:08d}.pt"
        code, stdout, err = invoke("attention", "--run", run, "--checkpoint", checkpoint,
                                   "--out", out, "a dog")  # fmt: skip
        assert code == 0 and stdout.strip() == str(out), err
        pictures.append(matplotlib.image.imread(out))
    assert pictures[0].shape != pictures[1].shape or (pictures[0] != pictures[1]).any()

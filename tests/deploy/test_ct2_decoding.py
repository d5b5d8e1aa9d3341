"""Decoding with the CTranslate2 export gives tfm's own outputs: the same greedy and beam-search
token ids on held-out sentences (differences only at near-ties), the same scores, the same
texts, and exactly the same per-token log-probabilities for every architecture option."""

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tiny_models import best_ids, decode_settings

import tfm
from tfm.commands.engines import open_translator
from tfm.config import load_config
from tfm.data.tokenizer import BOS_ID, EOS_ID
from tfm.prediction.settings import DecodeRequest, DecodeSettings
from tfm.prediction.translate import search_ids
from tfm.rundir.model_file import load_trained
from tfm.rundir.paths import find_run
from tfm.training import train

pytest.importorskip("ctranslate2")

from tfm.deploy import export_run, open_export  # noqa: E402
from tfm.deploy import translate_nbest_ids as ct2_nbest_ids  # noqa: E402

CPU = torch.device("cpu")


def settings_of(toy_model, **asked) -> DecodeSettings:
    """The run's decode settings with the strategy `asked` for (default: its config's, greedy)."""
    return DecodeSettings.from_config(toy_model.config.decoding, CPU, torch.float32, asked=asked)


def first_divergence_gap(model, source: list[int], ours: list[int], theirs: list[int]) -> float:
    """|log p(a) - log p(b)| under tfm's model at the first position where the two outputs
    differ (a, b the two tokens there, EOS where one output has ended)."""
    pairs = enumerate(zip(ours, theirs, strict=False))
    j = next((j for j, (a, b) in pairs if a != b), min(len(ours), len(theirs)))
    a = ours[j] if j < len(ours) else EOS_ID
    b = theirs[j] if j < len(theirs) else EOS_ID
    log_probs = token_log_probs(model, source, [BOS_ID, *ours[:j]])[-1]  # (V,)
    return abs(float(log_probs[a] - log_probs[b]))


def token_log_probs(model, source: list[int], target_in: list[int]) -> torch.Tensor:
    """tfm's log-probabilities of every next token after each target prefix: (T, V)."""
    with torch.inference_mode():
        logits = model(torch.tensor([source]), torch.tensor([target_in]))[0]  # (T, V)
    return logits.log_softmax(dim=-1)


def test_greedy_gives_tfms_token_ids_on_held_out_sentences(toy_model, held_out, exported):
    _, sources = held_out
    ours = best_ids(toy_model.model, sources, settings_of(toy_model))
    model = open_export(exported)
    found = ct2_nbest_ids(model, sources, settings_of(toy_model), with_scores=False)
    theirs = [hypotheses[0][0] for hypotheses in found]
    assert len({tuple(ids) for ids in ours}) > 150  # real, varied sentences
    assert sum(map(len, ours)) / len(ours) > 6
    different = [i for i in range(len(sources)) if ours[i] != theirs[i]]
    assert len(different) <= 0.005 * len(sources), different
    for i in different:  # only where two tokens were (nearly) tied
        assert first_divergence_gap(toy_model.model, sources[i], ours[i], theirs[i]) < 1e-4


@pytest.mark.parametrize("alpha", [0.6, 0.0])
def test_beam_search_gives_tfms_best_hypotheses_and_scores(toy_model, held_out, exported, alpha):
    """Beam 5 with GNMT's penalty, and without one (alpha 0: CTranslate2 runs with a tiny
    penalty of its own, since with none it changes its stopping rule)."""
    _, sources = held_out
    settings = settings_of(toy_model, beam_size=5, length_penalty=alpha)
    ours = search_ids(toy_model.model, sources, settings)
    model = open_export(exported)
    theirs = ct2_nbest_ids(model, sources, settings)
    same = [i for i in range(len(sources)) if ours[i][0].tokens == theirs[i][0][0]]
    assert len(same) >= 0.99 * len(sources)
    for i in same:  # tfm's GNMT-normalised score, recovered from CTranslate2's
        assert theirs[i][0][1] == pytest.approx(ours[i][0].score, abs=1e-4)


def test_texts_and_n_best_lists_are_tfms(toy_run, held_out, exported):
    """Both engines opened by `open_translator` give the same lines and n-best lists."""
    english, _ = held_out
    lines = [*english[:12], "  ", english[12]]
    ours = open_translator(DecodeRequest(run=toy_run, device="cpu"))
    theirs = open_translator(DecodeRequest(run=exported, device="cpu"))
    assert (ours.engine, theirs.engine) == ("torch", "ctranslate2")
    assert theirs.step == ours.step == 400 and theirs.config == ours.config
    for n_best in (1, 7):  # one rule for the strategy, whichever the engine
        opened = [open_translator(DecodeRequest(run=run, device="cpu", n_best=n_best))
                  for run in (toy_run, exported)]  # fmt: skip
        assert opened[0].settings == replace(opened[1].settings, dtype="float32")
    assert theirs.translate(lines) == ours.translate(lines)
    assert ours.translate(lines)[12] == "" and ours.translate(lines)[0] != ""
    asked = {"beam_size": 4}
    expected = ours.nbest(lines, 3, settings=ours.settings.asking(ours.config.decoding, asked))
    found = theirs.nbest(lines, 3, settings=theirs.settings.asking(ours.config.decoding, asked))
    assert found[12] == [("", 0.0)]
    for theirs_, ours_ in zip(found, expected, strict=True):
        assert [text for text, _ in theirs_] == [text for text, _ in ours_]
        assert [s for _, s in theirs_] == pytest.approx([s for _, s in ours_], abs=1e-4)


@pytest.mark.parametrize(
    "options",
    [
        ["model.norm_position=pre", "model.activation=gelu"],
        ["tokenizer.joint=false", "model.share_embeddings=false", "model.tie_output=false"],
        ["tokenizer.vocab_size=400", "tokenizer.byte_fallback=true"],
    ],
    ids=["pre-norm-gelu", "separate-vocabularies-untied", "byte-fallback"],
)
def test_every_token_log_probability_is_tfms(options, tmp_path):
    """Teacher-forced scores through CTranslate2 (`score_batch`) against tfm's, per token, on a
    model one step from its random start (so no weight is special), sources cut to its 64-row
    positional table as tfm cuts them."""
    run = tmp_path / "run"
    sets = [f"run_dir={run}", "data.toy.n_train=120", "data.toy.n_validation=4",
            "data.toy.n_test=4", "tokenizer.vocab_size=150", "model.d_model=32",
            "model.n_heads=4", "model.n_encoder_layers=2", "model.n_decoder_layers=2",
            "model.d_ff=48", "model.max_len=64", "train.max_steps=1",
            "train.validate_every=1", "decoding.max_len_b=2", *options]  # fmt: skip
    train(load_config(None, sets), progress_bar=False)
    trained = load_trained(find_run(run), CPU)
    export_run(run, tmp_path / "out")
    model = open_export(tmp_path / "out")
    english = ["the big dog sees the small cat", "birds sing 🙂", "the man thinks that " * 12]
    german = ["Der große Hund sieht die kleine Katze", "Vögel singen 猫", "Der Mann"]
    src = [ids[:63] for ids in trained.tokenizer.encode_src(english)]
    tgt = [ids[:63] for ids in trained.tokenizer.encode_tgt(german)]
    pieces = trained.tokenizer.src_pieces, trained.tokenizer.tgt_pieces
    byte_fallback = "tokenizer.byte_fallback=true" in options  # 🙂 and 猫: bytes, else <unk>
    assert ("<0xF0>" in pieces[0](src[1])) == byte_fallback == ("<0xE7>" in pieces[1](tgt[1]))
    scored = model.translator.score_batch([pieces[0](s) for s in src], [pieces[1](t) for t in tgt])
    for s, t, result in zip(src, tgt, scored, strict=True):
        log_probs = token_log_probs(trained.model, s + [EOS_ID], [BOS_ID, *t])  # (T, V)
        expected = log_probs.gather(1, torch.tensor([*t, EOS_ID])[:, None]).squeeze(1)
        assert result.log_probs == pytest.approx(expected.tolist(), abs=1e-5)
    long_source = [trained.tokenizer.encode_src([english[2]])[0] + [EOS_ID]]
    assert len(long_source[0]) > 64
    settings = decode_settings({"max_len_a": 2.0})
    ours = best_ids(trained.model, long_source, settings)
    theirs = ct2_nbest_ids(model, long_source, settings)
    assert theirs[0][0][0] == ours[0] and len(ours[0]) > 0


def test_translating_with_an_export_needs_no_torch(exported):
    """A process that only translates with an export never imports torch (it would add a few
    hundred MiB and seconds of start-up to a deployment)."""
    code = (
        "import sys\n"
        "from tfm.prediction.settings import DecodeRequest\n"
        "from tfm.commands.engines import open_translator\n"
        "translator = open_translator(DecodeRequest(run=sys.argv[1]))\n"
        "print(translator.translate(['the dog sees the cat'])[0] != '')\n"
        "print('torch' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(tfm.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", code, str(exported)], capture_output=True, text=True, env=env
    )
    assert done.stdout.split() == ["True", "False"], done.stderr[-2000:]

"""Sampling with a CTranslate2 export: its draws follow tfm's model's distribution as temperature,
top-k and top-p reshape it (chi-squared over many draws of the first token), top-k 1 (at any
temperature) and the least top p are its greedy search, every setting decodes at both ends of its
range, and a seed, which it cannot repeat, is refused in one line."""

import pytest
import torch
from sampling_checks import p_value, reshaped
from typer.testing import CliRunner

from tfm.cli import app
from tfm.commands.engines import open_translator
from tfm.data.tokenizer import BOS_ID, EOS_ID
from tfm.decoding_options import DECODING_SETTINGS
from tfm.errors import UsageError
from tfm.prediction.settings import DecodeRequest, DecodeSettings

pytest.importorskip("ctranslate2")

from tfm.deploy import open_export  # noqa: E402
from tfm.deploy import translate_nbest_ids as ct2_nbest_ids  # noqa: E402

DRAWS = 4000
LEAST = {setting.key: setting.low for setting in DECODING_SETTINGS}
MOST = {setting.key: setting.high for setting in DECODING_SETTINGS}
SETTINGS = [
    dict(temperature=2.5, top_k=0, top_p=1.0),
    dict(temperature=2.0, top_k=12, top_p=1.0),
    dict(temperature=3.0, top_k=0, top_p=0.9),
]


@pytest.fixture(scope="module")
def export(exported):
    return open_export(exported)


def settings_of(toy_model, decoding: dict | None = None, **asked) -> DecodeSettings:
    """The run's settings (greedy search), its decoding keys `decoding` changed, with the
    strategy `asked` for."""
    config = toy_model.config.decoding.model_copy(update=decoding or {})
    return DecodeSettings.from_config(config, "cpu", "float32", asked=asked)


@pytest.mark.parametrize("settings", SETTINGS)
def test_draws_follow_tfms_distribution_as_reshaped(toy_model, held_out, export, settings):
    _, sources = held_out
    source = sources[3]
    with torch.no_grad():
        logits = toy_model.model(torch.tensor([source]), torch.tensor([[BOS_ID]]))[0, -1]
    log_probs = logits.float().log_softmax(dim=-1)  # (V,)
    expected = reshaped(log_probs, **settings)
    assert int((expected * DRAWS >= 5).sum()) > 4  # a distribution worth testing
    one_token = settings_of(toy_model, {"max_len_a": 0.0, "max_len_b": 1}, **settings)
    [drawn] = ct2_nbest_ids(export, [source], one_token, DRAWS)
    assert len(drawn) == DRAWS
    first = torch.tensor([ids[0] if ids else EOS_ID for ids, _ in drawn])
    counts = torch.bincount(first, minlength=len(log_probs)).double()
    assert p_value(counts, expected) > 1e-3
    flatter = reshaped(log_probs, **{**settings, "temperature": settings["temperature"] * 1.5})
    assert p_value(counts, flatter) < 1e-3  # the test tells a slightly different distribution
    for ids, score in drawn[:50]:  # each sample scored by the model itself: log p(token)
        assert score == pytest.approx(float(log_probs[ids[0] if ids else EOS_ID]), abs=1e-4)


@pytest.mark.parametrize(
    "settings",
    [
        dict(top_k=1, temperature=3.0),
        dict(top_k=1, temperature=MOST["temperature"]),  # no tie of rounded log-probabilities
        dict(top_p=LEAST["top_p"]),
    ],
)
def test_top_k_one_and_the_least_top_p_are_greedy_search(toy_model, held_out, export, settings):
    _, sources = held_out
    greedy = ct2_nbest_ids(export, sources[:40], settings_of(toy_model), with_scores=False)
    drawn = ct2_nbest_ids(
        export, sources[:40], settings_of(toy_model, strategy="sampling", **settings), 3
    )
    assert [{tuple(ids) for ids, _ in found} for found in drawn] == [
        {tuple(found[0][0])} for found in greedy
    ]
    hot = ct2_nbest_ids(export, sources[:40], settings_of(toy_model, temperature=3.0), 3)
    assert [{tuple(ids) for ids, _ in found} for found in hot] != [
        {tuple(found[0][0])} for found in greedy
    ]  # not greedy without them


def test_every_setting_decodes_at_both_ends_of_its_range(toy_model, held_out, export):
    _, sources = held_out
    for setting in DECODING_SETTINGS:
        if setting.strategy == "sampling" and setting.key != "seed":  # an export takes no seed
            for end in (setting.low, setting.high):
                asked = settings_of(toy_model, strategy="sampling", **{setting.key: end})
                found = ct2_nbest_ids(export, sources[:8], asked, 2)
                assert all(len(hypotheses) == 2 for hypotheses in found), (setting.key, end)


def test_a_seed_is_refused_in_one_line_naming_it(exported):
    with pytest.raises(UsageError, match="seed 5: a CTranslate2 export cannot repeat seeded"):
        open_translator(DecodeRequest(run=exported, search={"seed": 5}))
    result = CliRunner().invoke(app, ["translate", "--run", str(exported), "--seed", "5", "a dog"])
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("tfm: error: seed 5: a CTranslate2 export cannot repeat seeded samples")
    unseeded = CliRunner().invoke(
        app, ["translate", "--run", str(exported), "--strategy", "sampling", "--n-best", "4",
              "the big dog sees the small cat"],
    )  # fmt: skip
    assert unseeded.exit_code == 0, unseeded.output
    assert len(unseeded.stdout.splitlines()) > 1  # four samples, more than one text

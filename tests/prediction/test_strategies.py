"""Strategies chosen by name: one rule resolves what the command line, the config and a server
request ask for (`strategy_for`), its errors name the key as the user wrote it, and the output
limit is one rule."""

from typing import get_args

import pytest

from tfm.config import DecodingConfig
from tfm.data.tokenizer import EOS_ID
from tfm.decoding_options import DECODING_SETTINGS
from tfm.errors import ConfigError, UsageError
from tfm.prediction.settings import DecodeRequest, DecodeSettings, OutputLimit
from tfm.prediction.strategies import (
    STRATEGIES,
    BeamSearch,
    GreedySearch,
    Sampling,
    strategy_for,
)
from tfm.prediction.translate import search_ids
from tfm.transformer import ModelArgs, Transformer, build_model

CONFIG = DecodingConfig(
    strategy="greedy", beam_size=4, length_penalty=0.3, temperature=0.8, top_p=0.9
)


def test_every_strategy_the_schema_names_is_a_class_with_its_keys_in_the_schema():
    literal, _ = get_args(DecodingConfig.model_fields["strategy"].annotation)  # or None
    names = get_args(literal)
    assert set(STRATEGIES) == set(names) == {"greedy", "beam", "sampling"}
    for cls in STRATEGIES.values():
        assert set(cls.keys) <= DecodingConfig.model_fields.keys()
        assert cls.from_config(CONFIG).describe()["strategy"] == cls.name


def test_the_strategy_named_else_the_one_whose_settings_are_given_else_the_configs():
    assert strategy_for(CONFIG, {}) == GreedySearch()
    assert strategy_for(CONFIG, {"strategy": "beam"}) == BeamSearch(beam_size=4, length_penalty=0.3)
    assert strategy_for(CONFIG, {"beam_size": 2}) == BeamSearch(beam_size=2, length_penalty=0.3)
    sampled = strategy_for(CONFIG, {"top_k": 3, "seed": 5, "beam_size": None})
    assert sampled == Sampling(temperature=0.8, top_k=3, top_p=0.9, seed=5)
    assert strategy_for(CONFIG.model_copy(update={"strategy": "sampling"}), {}) == Sampling(
        temperature=0.8, top_k=0, top_p=0.9, seed=None
    )


def test_a_list_comes_from_a_beam_widened_to_it_unless_its_size_or_greedy_was_asked_for():
    assert strategy_for(CONFIG, {}, n_best=3) == BeamSearch(beam_size=4, length_penalty=0.3)
    assert strategy_for(CONFIG, {}, n_best=6) == BeamSearch(beam_size=6, length_penalty=0.3)
    with pytest.raises(UsageError, match="^--n-best 6 needs --beam-size 6 or more, not 2$"):
        strategy_for(CONFIG, {"beam_size": 2}, n_best=6)
    with pytest.raises(UsageError, match="^--n-best 2: greedy search finds one translation"):
        strategy_for(CONFIG, {"strategy": "greedy"}, n_best=2)
    samples = strategy_for(CONFIG, {"strategy": "sampling"}, n_best=9)
    assert samples.hypotheses(9) == 9  # nine samples


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ({"strategy": "nucleus"}, "--strategy 'nucleus': expected one of greedy, beam, sampling"),
        ({"top_p": 1.5}, "--top-p 1.5: expected a number from 0.001 to 1"),
        ({"top_p": 0.0}, "--top-p 0.0: expected a number from 0.001 to 1"),
        ({"temperature": 0}, "--temperature 0: expected a number from 0.01 to 100"),
        ({"top_k": -1}, "--top-k -1: expected an integer from 0 to 1000000"),
        ({"strategy": "greedy", "temperature": 0.5},
         "--temperature is a setting of sampling; --strategy greedy does not use it"),
        ({"beam_size": 3, "top_k": 2},
         "--beam-size, --top-k: settings of different strategies (beam and sampling); choose one "
         "with --strategy"),
    ],
)  # fmt: skip
def test_errors_name_the_option_and_what_was_expected(asked, message):
    with pytest.raises(UsageError) as caught:
        strategy_for(CONFIG, asked)
    assert str(caught.value) == message


def test_a_config_left_unplanned_names_the_key_the_recipe_would_derive():
    with pytest.raises(ConfigError, match="decoding.strategy is not set"):
        strategy_for(DecodingConfig(), {})
    with pytest.raises(ConfigError, match="decoding.beam_size is not set"):
        strategy_for(DecodingConfig(), {"strategy": "beam"})
    assert strategy_for(DecodingConfig(), {"top_k": 4}).top_k == 4  # sampling has no such key


def test_errors_spell_the_keys_as_the_asker_does():
    with pytest.raises(UsageError, match=r"^top_p 2: expected a number from 0.001 to 1$"):
        strategy_for(CONFIG, {"top_p": 2}, spell=str)
    with pytest.raises(UsageError, match=r"^n_best 3 needs beam_size 3 or more, not 2$"):
        strategy_for(CONFIG, {"beam_size": 2}, n_best=3, spell=str)


def test_a_request_takes_the_options_it_has_and_the_decoding_keys():
    options = {"run": "r", "split": "test", "beam_size": 3, "top_k": None, "n_best": 2,
               "ensemble": ["a"], "threads": None}  # fmt: skip
    request = DecodeRequest.from_options(options)
    assert (request.run, request.n_best, request.ensemble) == ("r", 2, ("a",))
    assert request.search == {"beam_size": 3}
    with pytest.raises(ValueError, match="not decoding keys: \\['split'\\]"):
        DecodeRequest(search={"split": "test"})
    with pytest.raises(UsageError, match="^--top-p 3: expected a number from 0.001 to 1$"):
        DecodeRequest(search={"top_p": 3})  # checked before a run is opened


def test_the_output_limit_is_a_times_source_length_plus_b_within_the_positional_table():
    limit = OutputLimit(1.5, 2)
    assert [limit.tokens(n, 64) for n in (1, 4, 7)] == [3, 8, 12]
    assert limit.tokens(100, 64) == 64 and OutputLimit(0.0, 0).tokens(5, 64) == 1
    with pytest.raises(ValueError, match="max_len_a=-1"):
        OutputLimit(-1, 10)


BEAM_3 = {"strategy": "beam", "beam_size": 3}


@pytest.mark.parametrize(("strategy", "budget"), [({}, 60), (BEAM_3, 20)])
def test_a_decoding_batch_holds_max_tokens_decoder_rows(monkeypatch, strategy, budget):
    """A source takes one decoder row per hypothesis: a beam of 3 gets a third of the sources."""
    settings = DecodeSettings.from_config(CONFIG.model_copy(update={"max_tokens": 60, **strategy}),
                                          "cpu", "float32")  # fmt: skip
    assert settings.batch_source_tokens() == budget
    shapes = []
    encode = Transformer.encode

    def spy(model, src, *args, **kwargs):
        shapes.append(tuple(src.shape))
        return encode(model, src, *args, **kwargs)

    monkeypatch.setattr(Transformer, "encode", spy)
    model = build_model(ModelArgs(src_vocab_size=40, tgt_vocab_size=40, d_model=16, n_heads=2,
                                  n_encoder_layers=1, n_decoder_layers=1, d_ff=32))  # fmt: skip
    sources = [[5] * (n % 7) + [EOS_ID] for n in range(30)]  # 1 to 7 tokens each
    search_ids(model, sources, settings)
    assert sum(rows for rows, _ in shapes) == 30
    assert all(rows * width <= budget for rows, width in shapes)
    assert any(rows * width > budget - 7 for rows, width in shapes)  # filled, not one at a time


def test_every_setting_decodes_at_both_ends_of_its_range():
    """No value the schema takes fails later: each setting at its least and its most (a beam of
    the widest, a temperature of 0.01 and of 100, a top p of 0.001, the largest seed)."""
    model = build_model(ModelArgs(src_vocab_size=40, tgt_vocab_size=40, d_model=16, n_heads=2,
                                  n_encoder_layers=1, n_decoder_layers=1, d_ff=32))  # fmt: skip
    sources = [[5, 9, 7, EOS_ID], [11, EOS_ID]]
    base = CONFIG.model_copy(update={"max_len_a": 0.0, "max_len_b": 4})
    for setting in DECODING_SETTINGS:
        for end in (setting.low, setting.high):
            asked = {setting.key: end}
            settings = DecodeSettings.from_config(base, "cpu", "float32", asked=asked)
            found = search_ids(model, sources, settings)
            assert [len(hypotheses) >= 1 for hypotheses in found] == [True, True], asked
            assert all(len(ids) <= 4 for hypotheses in found for ids, _ in hypotheses)

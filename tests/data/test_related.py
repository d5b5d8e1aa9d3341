"""Related pairs (`data.related`): read beside the main pair in their own languages, each source
after its target language's tag where the model translates into several; the main pair read
again until it makes its share of an epoch; no related pair trains on a sentence of the main
pair's validation or test; a helper in another script left out and said so; the mistakes named
with their key before any work."""

import pytest
import yaml
from typer.testing import CliRunner

from tfm.cli import app
from tfm.config import Config, DataConfig, load_config
from tfm.config.schema import TokenizerConfig
from tfm.data.cache.cache_key import ContentDigests, corpus_key
from tfm.data.pipeline import fit_tokenizer, load_texts, related_validations
from tfm.data.related import (
    GUARD_LABEL,
    describe_mix,
    main_batch_share,
    main_times,
    script_of,
)
from tfm.data.tokenizer import EOS_ID
from tfm.errors import ConfigError

IT = [(f"main sentence {i} .", f"frase principale {i} .") for i in range(20)]
FR = [(f"helper sentence {i} .", f"phrase d'aide {i} .") for i in range(50)]
JA = [(f"far sentence {i} .", f"遠い文{i}です。") for i in range(30)]


def write_pairs(folder, name: str, langs: tuple[str, str], pairs: list[tuple[str, str]]) -> str:
    for side, lang in enumerate(langs):
        text = "".join(pair[side] + "\n" for pair in pairs)
        (folder / f"{name}.{lang}").write_text(text, encoding="utf-8")
    return str(folder / name)


@pytest.fixture
def data(tmp_path) -> dict:
    return {
        "src_lang": "en",
        "tgt_lang": "it",
        "train": {"format": "text", "path": write_pairs(tmp_path, "it", ("en", "it"), IT)},
        "validation": {
            "format": "text",
            "path": write_pairs(tmp_path, "valid", ("en", "it"), [("shared one .", "uno .")]),
        },
        "related": [
            {
                "format": "text",
                "path": write_pairs(tmp_path, "fr", ("en", "fr"), FR),
                "src_lang": "en",
                "tgt_lang": "fr",
            },
        ],  # fmt: skip
    }


def test_one_to_many_tags_every_source_and_reads_the_main_pair_until_it_makes_half(data):
    config = DataConfig.model_validate(data)
    src, tgt, report = load_texts(config, "train")
    main = [f"<2it> {en}" for en, _ in IT]
    helper = [f"<2fr> {en}" for en, _ in FR]
    # 20 main pairs beside 50: read 3 times (60 of 110) for at least half of the epoch
    assert src == main + helper + main + main
    assert tgt[:20] == [it for _, it in IT] and tgt[20:70] == [fr for _, fr in FR]
    assert report.corpora == [(20, 3), (50, 1)]
    assert config.tags() == ("2fr", "2it")
    [mix] = describe_mix(config, report)
    assert "en→it 20 ×3, en→fr 50" in mix and "55% of an epoch's 110 pairs" in mix
    assert main_batch_share(config, report) == pytest.approx(20 / 110)  # its own epoch's share


def test_the_plan_sizes_the_batch_from_the_main_pair_s_own_epoch(data, tmp_path):
    import torch

    from tfm.training.recipe.plan import plan_run

    config = Config.model_validate({"run_dir": str(tmp_path / "run"), "data": data})
    planned, plan = plan_run(config, device=torch.device("cpu"), dtype=torch.float32)
    reason = plan.reasons["train.max_tokens"]
    assert "an epoch of the main pair's " in reason
    epoch = int(reason.split("the main pair's ")[1].split(" batch tokens")[0].replace(",", ""))
    whole = plan.entry.split(max_length=config.data.max_length)
    assert epoch < 0.25 * sum(len(ids) for ids in whole.tgt)  # 20 of 110 pairs, padded
    assert any(line.startswith("mix: en→it 20 ×3") for line in plan.lines)


def test_main_share_sets_how_often_the_main_pair_is_read(data):
    data["main_share"] = 0.2
    _, _, report = load_texts(DataConfig.model_validate(data), "train")
    assert report.corpora == [(20, 1), (50, 1)]  # 20 of 70 is already over a fifth
    assert [main_times(20, 50, share) for share in (0.2, 0.5, 0.75)] == [1, 3, 8]
    assert main_times(20, 0, 0.5) == 1


def test_many_to_one_needs_no_tags(data, tmp_path):
    data.update(src_lang="it", tgt_lang="en")
    data["validation"]["path"] = write_pairs(tmp_path, "valid", ("en", "it"), [("a .", "b .")])
    data["related"][0].update(src_lang="fr", tgt_lang="en")
    config = DataConfig.model_validate(data)
    src, tgt, _ = load_texts(config, "train")
    assert config.tags() == () and config.target_tag() is None
    assert src[:20] == [it for _, it in IT] and src[20:70] == [fr for _, fr in FR]
    assert tgt[20:70] == [en for en, _ in FR]


def test_no_related_pair_trains_on_a_sentence_of_the_main_validation(data, tmp_path):
    leak = ("shared one .", "une .")  # the main validation's English source, in the helper
    data["related"][0]["path"] = write_pairs(tmp_path, "fr", ("en", "fr"), [*FR, leak])
    src, _, report = load_texts(DataConfig.model_validate(data), "train")
    assert "<2fr> shared one ." not in src
    assert report.dropped == {GUARD_LABEL: 1}


def test_held_out_main_splits_are_kept_out_of_the_related_corpora(data, tmp_path):
    del data["validation"]  # held out of the main corpus
    many = [(f"main sentence {i} .", f"frase {i} .") for i in range(400)]
    data["train"]["path"] = write_pairs(tmp_path, "it", ("en", "it"), many)
    data["related"][0]["path"] = write_pairs(tmp_path, "fr", ("en", "fr"), [
        (en, f"phrase {i} .") for i, (en, _) in enumerate(many)])  # fmt: skip
    config = DataConfig.model_validate(data)
    src, _, _ = load_texts(config, "train")
    held = set(load_texts(config, "validation")[0]) | set(load_texts(config, "test")[0])
    assert held
    trained = {text.split(" ", 1)[1] for text in src}
    assert not held & trained
    assert len([s for s in src if s.startswith("<2fr>")]) == 400 - len(held)


def test_a_helper_in_another_script_is_left_out_unless_its_repeat_is_given(data, tmp_path):
    ja = {"format": "text", "path": write_pairs(tmp_path, "ja", ("en", "ja"), JA),
          "src_lang": "en", "tgt_lang": "ja"}  # fmt: skip
    data["related"].append(ja)
    config = DataConfig.model_validate(data)
    src, _, report = load_texts(config, "train")
    assert not any(text.startswith("<2ja>") for text in src)
    assert report.corpora[2] == (30, 0)
    notes = describe_mix(config, report)
    assert (
        "data.related[1]: left out: its ja is written in hiragana script, it in latin" in (notes[1])
    )
    ja["repeat"] = 1
    src, _, _ = load_texts(DataConfig.model_validate(data), "train")
    assert sum(text.startswith("<2ja>") for text in src) == 30


def test_script_of_names_the_script_most_letters_are_in():
    assert script_of(["Привет, мир", "ok"]) == "CYRILLIC"
    assert script_of(["Hello 123"]) == "LATIN"
    assert script_of(["123 !"]) == "NONE"


def test_the_cache_key_follows_the_main_validation_that_the_related_corpora_leave_out(
    data, tmp_path
):
    config = Config.model_validate({"run_dir": str(tmp_path / "run"), "data": data})
    key = corpus_key(config, ContentDigests(tmp_path / "cache"), read=False)
    assert key is None  # the training files' digests are not known before a read
    digests = ContentDigests(tmp_path / "cache")
    for path in tmp_path.glob("*.en"):
        digests.update(path, path.read_bytes())
    for path in [*tmp_path.glob("*.it"), *tmp_path.glob("*.fr")]:
        digests.update(path, path.read_bytes())
    before = corpus_key(config, digests, read=True)
    write_pairs(tmp_path, "valid", ("en", "it"), [("another one .", "altro .")])
    after = corpus_key(config, digests, read=True)
    assert before is not None and after is not None and before.corpus != after.corpus


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tgt_lang": "it"}, "data.related[0]: en→it is the main pair itself: put the corpus "
                             "in data.train"),
        ({"tgt_lang": "french"}, "'french' is not a language code of two or three lowercase "
                                 "letters"),
        ({"src_lang": "fr"}, "data.related[0]: src_lang and tgt_lang are both 'fr'"),
        ({"tag": "x"}, "data.related[0].tag: a related corpus takes no tag of its own"),
        ({"validation": {"format": "held_out"}}, "data.related[0].validation: format "
                                                 "'held_out' holds out of data.train, the main "
                                                 "pair's; name the related pair's own"),
        ({"validation": {"format": "text", "path": "v", "tag": "x"}},
         "data.related[0].validation.tag: only training corpora take a tag"),
    ],
)  # fmt: skip
def test_a_related_corpus_that_cannot_be_one_is_named(data, tmp_path, change, message):
    data["related"][0].update(change)
    with pytest.raises(ConfigError) as error:
        loaded(data, tmp_path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_pair_validated_twice_is_named(data, tmp_path):
    second = {**data["related"][0], "validation": {"format": "text", "path": "v2"}}
    data["related"][0]["validation"] = {"format": "text", "path": "v1"}
    with pytest.raises(ConfigError) as error:
        loaded({**data, "related": [data["related"][0], second]}, tmp_path)
    assert "data.related[1].validation: en-fr is validated by data.related[0].validation " in (
        str(error.value)
    )


def test_main_share_without_related_and_related_with_monolingual_are_refused(data, tmp_path):
    with pytest.raises(ConfigError, match="data.main_share has no effect without data.related"):
        loaded({**data, "related": [], "main_share": 0.5}, tmp_path)
    (tmp_path / "mono.it").write_text("una frase\n", encoding="utf-8")
    data["monolingual"] = [{"path": str(tmp_path / "mono.it"), "lang": "it"}]
    with pytest.raises(ConfigError, match="data.related and data.monolingual do not go together"):
        loaded(data, tmp_path)


def loaded(data: dict, folder) -> Config:
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({"run_dir": str(folder / "run"), "data": data}))
    return load_config(str(path), [])


def test_a_missing_related_file_is_one_line_naming_its_key(data, tmp_path):
    data["related"][0]["path"] = str(tmp_path / "nowhere")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"), "data": data}))
    result = CliRunner().invoke(app, ["data", "check", "--config", str(config)])
    assert result.exit_code != 0
    assert "data.related[0]" in result.output and "nowhere.en" in result.output
    assert "Traceback" not in result.output


def test_a_missing_related_validation_file_is_one_line_naming_its_key_before_any_work(
    data, tmp_path
):
    data["related"][0]["validation"] = {"format": "text", "path": str(tmp_path / "nowhere")}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"), "data": data}))
    result = CliRunner().invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "data.related[0].validation" in result.output and "nowhere.en" in result.output
    assert not (tmp_path / "run").exists()


def test_a_related_pair_s_validation_is_encoded_after_its_tag_and_left_out_with_its_corpus(
    data, tmp_path, caplog
):
    valid_fr = [("a helper check .", "une vérification ."), ("and one more .", "et encore .")]
    data["related"][0]["validation"] = {
        "format": "text",
        "path": write_pairs(tmp_path, "valid-fr", ("en", "fr"), valid_fr),
    }
    ja_valid = write_pairs(tmp_path, "valid-ja", ("en", "ja"), [("far one .", "遠い。")])
    data["related"].append({"format": "text", "path": write_pairs(tmp_path, "ja", ("en", "ja"),
                            JA), "src_lang": "en", "tgt_lang": "ja",
                            "validation": {"format": "text", "path": ja_valid}})  # fmt: skip
    config = DataConfig.model_validate(data)
    src, tgt, report = load_texts(config, "train")
    tokenizer = fit_tokenizer(src, tgt, TokenizerConfig(vocab_size=150), tags=config.tags())
    with caplog.at_level("INFO", logger="tfm.data"):
        [found] = related_validations(config, tokenizer, report)  # ja's corpus is left out
    assert (found.pair, found.tgt_lang) == ("en-fr", "fr")
    assert found.split.src_text == [en for en, _ in valid_fr]
    tagged = tokenizer.encode_src(found.split.src_text, tag="2fr")
    assert found.split.src == [[*ids, EOS_ID] for ids in tagged]  # framed as validation decodes
    assert {ids[0] for ids in found.split.src} == {tokenizer.tag_id("2fr")}
    assert found.split.tgt_text == [fr for _, fr in valid_fr]
    assert "data.related[1].validation: not scored, the mix left its corpus out" in caplog.text
    assert "data.related[0].validation, en-fr: read 2 pairs from" in caplog.text


def test_the_data_check_finds_validation_sources_that_training_reads_after_their_tag(
    data, tmp_path
):
    from tfm.data.check import check_data

    valid = [("main sentence 3 .", "frase principale 3 ."), ("not trained on .", "mai .")]
    data["validation"]["path"] = write_pairs(tmp_path, "valid", ("en", "it"), valid)
    config = Config.model_validate({"run_dir": str(tmp_path / "run"), "data": data,
                                    "tokenizer": {"vocab_size": 150}})  # fmt: skip
    found = check_data(config)["splits"]
    assert (found["validation"]["src_in_train"], found["validation"]["pairs_in_train"]) == (1, 1)
    assert found["train"]["src_words"]["mean"] == pytest.approx(4.0)  # no tag counted as a word

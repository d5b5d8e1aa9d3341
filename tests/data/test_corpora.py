"""Several training corpora in `data.train`: read one after another, each `repeat` times, a
tagged corpus's sources after its tag; the tag a reserved token that encodes as one id, is never
learnt as BPE pieces and never comes out of decoding; validation and test held out of the first
corpus only; the mistakes named with their key."""

import numpy as np
import pytest
from typer.testing import CliRunner

from tfm.cli import app
from tfm.config import Config, DataConfig, load_config
from tfm.data.cache.bulk_encoding import BulkEncoder
from tfm.data.cache.prepared_cache import prepared_entry
from tfm.data.pipeline import load_texts
from tfm.data.tokenizer import Tokenizer, train_tokenizer
from tfm.data.training_reads import stream_training
from tfm.errors import ConfigError


def write_pairs(folder, name: str, pairs: list[tuple[str, str]]) -> str:
    for side, lang in enumerate(("en", "fr")):
        text = "".join(pair[side] + "\n" for pair in pairs)
        (folder / f"{name}.{lang}").write_text(text, encoding="utf-8")
    return str(folder / name)


REAL = [(f"real {i} sentence .", f"vraie phrase {i} .") for i in range(40)]
MORE = [(f"other {i} words", f"autres mots {i}") for i in range(30)]


@pytest.fixture
def corpora(tmp_path) -> dict:
    return {
        "src_lang": "en",
        "tgt_lang": "fr",
        "train": [
            {"format": "text", "path": write_pairs(tmp_path, "real", REAL), "repeat": 2},
            {"format": "text", "path": write_pairs(tmp_path, "more", MORE), "tag": "bt"},
        ],
        "validation": {"format": "text", "path": write_pairs(tmp_path, "valid", REAL[:3])},
    }


def test_corpora_are_read_in_order_each_repeat_times_the_tagged_ones_after_their_tag(corpora):
    data = DataConfig.model_validate(corpora)
    src, tgt, report = load_texts(data, "train")
    assert src == [en for en, _ in REAL] * 2 + [f"<bt> {en}" for en, _ in MORE]
    assert tgt == [fr for _, fr in REAL] * 2 + [fr for _, fr in MORE]
    assert (report.read, report.kept) == (110, 110)
    assert report.origin.endswith("more.{en,fr} <bt>") and " ×2 + " in report.origin
    assert data.tags() == ("bt",)


def test_a_corpus_s_drops_count_once_for_each_time_it_is_read(corpora, tmp_path):
    corpora["train"][0]["path"] = write_pairs(tmp_path, "gaps", [*REAL[:5], ("", "vide")])
    stream, report_of = stream_training(DataConfig.model_validate(corpora))
    assert sum(len(chunk) for chunk in stream) == 2 * 5 + 30
    report = report_of()
    assert (report.read, report.kept, report.dropped) == (12 + 30, 40, {"empty": 2})


def test_the_held_out_splits_come_from_the_first_corpus_and_no_corpus_trains_on_them(
    corpora, tmp_path
):
    shared = REAL[0]  # in both corpora: held out of the first, so left out of the second too
    corpora["train"][1]["path"] = write_pairs(tmp_path, "more", [*MORE, shared])
    del corpora["validation"]
    data = DataConfig.model_validate(corpora)
    held = load_texts(data, "validation")
    src, _, _ = load_texts(data, "train")
    held_sources = set(held[0])
    assert held_sources and held_sources <= {en for en, _ in REAL}
    assert not held_sources & {text.removeprefix("<bt> ") for text in src}


def test_the_cache_entry_holds_the_tag_as_one_reserved_id_before_the_source(corpora, tmp_path):
    config = Config.model_validate({"run_dir": str(tmp_path / "run"), "data": corpora,
                                    "tokenizer": {"vocab_size": 120}})  # fmt: skip
    entry = prepared_entry(config, announce=False)
    tokenizer = entry.tokenizer()
    tag = tokenizer.tag_id("bt")
    src = entry.ids("src")
    plain = tokenizer.encode_src([MORE[0][0]])[0]
    assert src[80] == [tag, *plain, 2]  # the first tagged pair: tag, ids, EOS
    assert all(tag not in row for row in src[:80])
    pieces = tokenizer.bpe_models[0].get_vocab()
    assert [piece for piece in pieces if "bt" in piece] == ["<bt>"]  # no merge learnt of it


def test_a_tag_encodes_as_one_id_is_never_decoded_and_changes_the_fingerprint(tmp_path):
    src, tgt = [en for en, _ in REAL], [fr for _, fr in REAL]
    tagged = train_tokenizer(src, tgt, vocab_size=120, min_frequency=1, tags=("bt",))
    plain = train_tokenizer(src, tgt, vocab_size=120, min_frequency=1)
    tag = tagged.tag_id("bt")
    ids = tagged.encode_src(["<bt> real 3 sentence .", "real 3 sentence ."])
    assert ids[0] == [tag, *ids[1]] and tagged.tags == ("bt",) and plain.tags == ()
    assert tagged.decode_tgt([[tag, *ids[1], tag]]) == ["real 3 sentence ."]
    assert tagged.fingerprint() != plain.fingerprint()
    tagged.save(tmp_path)
    loaded = Tokenizer.load(tmp_path)
    assert loaded.fingerprint() == tagged.fingerprint() and loaded.tag_id("bt") == tag


def test_bulk_encoding_gives_the_tokenizer_s_own_ids_around_tags():
    src, tgt = [en for en, _ in REAL], [fr for _, fr in REAL]
    tok = train_tokenizer(src, tgt, vocab_size=120, min_frequency=1, tags=("bt", "x2")).bpe_models[
        0
    ]
    texts = ["<bt> real 1 sentence .", "<x2>real 2", "real <bt> 3", "<bt>  real  4 ", "", "<bt> ",
             "plain 5 sentence", "<bt> real <x2> 6"]  # fmt: skip
    flat, lengths = BulkEncoder(tok).encode(texts)
    rows = [row.tolist() for row in np.split(flat, np.cumsum(lengths)[:-1])]
    assert rows == [e.ids for e in tok.encode_batch_fast(texts, add_special_tokens=False)]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("data.train", "[{format: text, path: a, tag: bt}]",
         "data.train[0]: the first training corpus is the pair's own"),
        ("data.train", "[{format: text, path: a}, {format: text, path: b, tag: 'B T'}]",
         "data.train[1].tag: string should match pattern"),
        ("data.train", "[{format: text, path: a}, {format: text, path: b, reapeat: 2}]",
         "unknown key 'data.train[1].reapeat'; did you mean 'repeat'?"),
        ("data.train", "[]", "data.train: list should have at least 1 item"),
        ("data.validation", "{format: text, path: v, tag: bt}",
         "data.validation.tag: only training corpora take a tag"),
        ("data.monolingual", "[{path: m.en, lang: en}]",
         "data.monolingual[0].lang: 'en' is the source language of en→de: tfm back-translates "
         "text in the target language ('de')"),
        ("data.monolingual", "[{path: m.de, lang: de}, {path: m.fr, lang: fr}]",
         "data.monolingual[1].lang: 'fr' is neither language of the pair en→de; expected 'de'"),
    ],
)  # fmt: skip
def test_mistakes_in_the_corpora_name_their_key(key, value, expected):
    with pytest.raises(ConfigError) as caught:
        load_config(None, [f"{key}={value}"])
    assert expected in str(caught.value)


def test_a_missing_or_empty_monolingual_file_is_one_line_before_any_work(tmp_path):
    (tmp_path / "empty.de").write_text("", encoding="utf-8")
    missing, empty = tmp_path / "none.de", tmp_path / "empty.de"
    for path, says in (
        (missing, f"{missing}: no such file"),
        (empty, f"{empty} is empty; give a file of sentences, one a line"),
    ):
        config = tmp_path / "run.yaml"
        config.write_text(
            f"run_dir: {tmp_path / 'run'}\ndata:\n  monolingual: [{{path: {path}, lang: de}}]\n",
            encoding="utf-8",
        )
        result = CliRunner().invoke(app, ["train", "--config", str(config), "--no-progress"])
        assert result.exit_code == 2
        assert result.stderr == f"tfm: error: data.monolingual[0].path: {says}\n"
        assert not (tmp_path / "run").exists()

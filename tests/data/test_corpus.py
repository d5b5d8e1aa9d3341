"""load_split: every format into two lists (src, tgt); bad data as a located error or a count."""

import json
import logging
import sys
import types
from pathlib import Path

import datasets
import pydantic
import pytest

import tfm.data.toy
from tfm.config import SourceConfig, ToyConfig
from tfm.data import library_corpora
from tfm.data.corpus import LoadReport, load_split
from tfm.errors import DataError

MULTI30K = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"
TOY = ToyConfig(n_train=3, n_validation=2, n_test=1, seed=7)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No test may reach the network: the hub loader fails unless a test replaces it."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*args, **kwargs):
        raise AssertionError(f"load_dataset called with {args} {kwargs}")

    monkeypatch.setattr(datasets, "load_dataset", no_network)


def load(tfm_split="train", src_lang="de", tgt_lang="en", toy=TOY, **source):
    """load_split for the tfm split `tfm_split`; keywords make the SourceConfig."""
    texts, report = load_split(
        SourceConfig(**source), split=tfm_split, src_lang=src_lang, tgt_lang=tgt_lang, toy=toy
    )
    assert list(texts) == ["src", "tgt"]
    return list(zip(texts["src"][:], texts["tgt"][:], strict=True)), report


def write_text(tmp_path, de: bytes, en: bytes) -> str:
    (tmp_path / "train.de").write_bytes(de)
    (tmp_path / "train.en").write_bytes(en)
    return str(tmp_path / "train")


# --- formats -----------------------------------------------------------------------------------


def test_text_reads_aligned_files_in_either_direction(tmp_path):
    prefix = write_text(
        tmp_path, "Ein Hund läuft.\nZwei Katzen.\n".encode(), b"A dog runs.\nTwo cats.\n"
    )
    pairs, report = load(format="text", path=prefix)
    assert pairs == [("Ein Hund läuft.", "A dog runs."), ("Zwei Katzen.", "Two cats.")]
    assert report.origin == f"{prefix}.{{de,en}}"
    pairs, _ = load(format="text", path=prefix, src_lang="en", tgt_lang="de")
    assert pairs == [("A dog runs.", "Ein Hund läuft."), ("Two cats.", "Zwei Katzen.")]


def test_tsv_columns_name_languages_and_quotes_are_text(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text('A "dog.\tEin Hund.\nTwo cats."\tZwei Katzen.\n', encoding="utf-8")
    pairs, _ = load(format="tsv", path=str(path), columns=["en", "de"])
    assert pairs == [("Ein Hund.", 'A "dog.'), ("Zwei Katzen.", 'Two cats."')]
    pairs, _ = load(format="tsv", path=str(path), src_lang="en", tgt_lang="de")  # default order
    assert pairs[0] == ('A "dog.', "Ein Hund.")


def test_tsv_row_without_two_fields_names_file_and_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("a\tb\nno tab here\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:2: expected 2 tab-separated fields .* found 1"):
        load(format="tsv", path=str(path))
    path.write_text("a\tb\tc\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:1: .*found 3"):
        load(format="tsv", path=str(path))


@pytest.mark.parametrize("header", ["en\tde", "DE\tEN", "source\ttarget", "src\ttgt "])
def test_a_tsv_header_is_named_not_trained_on(tmp_path, header):
    path = tmp_path / "train.tsv"
    path.write_text(f"{header}\nA dog.\tEin Hund.\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:1: a header \(.*\), not a pair: .*tail -n \+2"):
        load(format="tsv", path=str(path), columns=["en", "de"])
    path.write_text("A dog.\tEin Hund.\nen\tde\n", encoding="utf-8")  # a pair, past line 1
    assert load(format="tsv", path=str(path))[0][1] == ("en", "de")


def test_tsv_columns_must_be_the_two_languages(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"data.train.columns is \['de', 'fr'\]"):
        load(format="tsv", path=str(path), columns=["de", "fr"])


def test_jsonl_flat_and_nested_fields(tmp_path):
    flat, nested = tmp_path / "flat.jsonl", tmp_path / "nested.jsonl"
    flat.write_text('{"de": "Ein Hund.", "en": "A dog."}\n', encoding="utf-8")
    nested.write_text(
        json.dumps({"translation": {"de": "Ein Hund.", "en": "A dog."}, "id": 3}) + "\n",
        encoding="utf-8",
    )
    assert load(format="jsonl", path=str(flat))[0] == [("Ein Hund.", "A dog.")]
    fields = {"de": "translation.de", "en": "translation.en"}
    pairs, _ = load(format="jsonl", path=str(nested), fields=fields, src_lang="en", tgt_lang="de")
    assert pairs == [("A dog.", "Ein Hund.")]
    # Without fields, the first object decides: translation.{lang} where {lang} is not a field
    blank_first = tmp_path / "blank_first.jsonl"
    blank_first.write_text("\n" + nested.read_text(encoding="utf-8"), encoding="utf-8")
    pairs, report = load(format="jsonl", path=str(blank_first))
    assert pairs == [("Ein Hund.", "A dog.")] and report.dropped == {"empty": 1}
    mixed = {"de": "Hallo.", "translation": {"de": "Ein Hund.", "en": "A dog."}}
    nested.write_text(json.dumps(mixed) + "\n", encoding="utf-8")  # de is a field of its own
    assert load(format="jsonl", path=str(nested))[0] == [("Hallo.", "A dog.")]
    with pytest.raises(DataError, match=r"no field 'fr' for 'fr' \(keys: de, translation\)"):
        load(format="jsonl", path=str(nested), src_lang="fr")


def test_jsonl_bad_json_or_missing_field_names_file_and_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"de": "a", "en": "b"}\n{"de": "a", "en": \n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:2: not valid JSON"):
        load(format="jsonl", path=str(path))
    path.write_text('{"de": "a", "en": "b"}\n{"de": "a", "english": "b"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:2: no field 'en' for 'en' .*data.train.fields"):
        load(format="jsonl", path=str(path))
    with pytest.raises(DataError, match=rf"{path}:1: no field 'translation.de'"):
        load(format="jsonl", path=str(path), fields={"de": "translation.de"})
    with pytest.raises(DataError, match=r"data.train.fields has \['dee'\]"):
        load(format="jsonl", path=str(path), fields={"dee": "de"})


def test_null_is_an_empty_side_and_other_types_are_errors(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"de": "a", "en": "A"}\n{"de": null, "en": "B"}\n', encoding="utf-8")
    pairs, report = load(format="jsonl", path=str(path))
    assert pairs == [("a", "A")] and report.dropped == {"empty": 1}
    path.write_text('{"de": "a", "en": 7}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:1: field 'en' holds int, expected a string"):
        load(format="jsonl", path=str(path))
    datasets.Dataset.from_dict({"de": ["a"], "en": [7]}).save_to_disk(str(tmp_path / "ints"))
    with pytest.raises(DataError, match=r"column 'en' holds Value\('int64'\), expected strings"):
        load(format="disk", path=str(tmp_path / "ints"))


def test_options_the_format_ignores_are_refused_by_the_schema(tmp_path):
    prefix = write_text(tmp_path, b"a\n", b"A\n")
    with pytest.raises(pydantic.ValidationError, match="fields has no effect with format 'text'"):
        load(format="text", path=prefix, fields={"de": "german"})


def test_disk_dataset_and_dataset_dict_share_the_hub_column_code(tmp_path):
    rows = {"translation": [{"de": "Ein Hund.", "en": "A dog."}], "id": [0]}
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "one"))
    splits = {"train": {"de": ["x"], "en": ["y"]}, "valid": {"de": ["Hallo"], "en": ["Hello"]}}
    datasets.DatasetDict(
        {name: datasets.Dataset.from_dict(columns) for name, columns in splits.items()}
    ).save_to_disk(str(tmp_path / "dict"))

    fields = {"de": "translation.de", "en": "translation.en"}
    pairs, _ = load(format="disk", path=str(tmp_path / "one"), fields=fields)
    assert pairs == [("Ein Hund.", "A dog.")]
    pairs, report = load(format="disk", path=str(tmp_path / "dict"))  # split "train"
    assert pairs == [("x", "y")]
    pairs, report = load(format="disk", path=str(tmp_path / "dict"), split="valid")
    assert pairs == [("Hallo", "Hello")] and "valid" in report.origin
    with pytest.raises(DataError, match=r"no split 'validation' \(splits: train, valid\)"):
        load("validation", format="disk", path=str(tmp_path / "dict"))
    # The hub's translation layout needs no fields: a language not named is read from
    # translation.{lang} where it is not a column of its own
    assert load(format="disk", path=str(tmp_path / "one"))[0] == [("Ein Hund.", "A dog.")]
    with pytest.raises(DataError, match=r"no column 'fr' for 'fr' \(columns: translation"):
        load(format="disk", path=str(tmp_path / "one"), src_lang="fr")
    with pytest.raises(DataError, match=r"one Dataset without splits; remove data.train.split"):
        load(format="disk", path=str(tmp_path / "one"), split="train", fields=fields)


def test_hub_uses_split_name_and_fields(monkeypatch):
    calls = []

    def fake_load_dataset(name, split):
        calls.append((name, split))
        return datasets.Dataset.from_dict({"german": ["Hallo"], "english": ["Hello"]})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    fields = {"de": "german", "en": "english"}
    pairs, _ = load("validation", format="hub", name="someone/corpus", fields=fields)
    assert pairs == [("Hallo", "Hello")]
    load("validation", format="hub", name="someone/corpus", split="dev", fields=fields)
    assert calls == [("someone/corpus", "validation"), ("someone/corpus", "dev")]


def test_hub_unreachable_suggests_a_local_format(monkeypatch, caplog):
    def unreachable(*args, **kwargs):
        logging.getLogger("huggingface_hub.utils._http").warning("retrying in 1 s")
        raise ConnectionError("Couldn't reach 'someone/corpus' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    level = logging.getLogger("huggingface_hub").level
    with pytest.raises(DataError, match="could not reach the HuggingFace hub") as error:
        load(format="hub", name="someone/corpus")
    assert "data.train.format: disk" in str(error.value)
    assert "\n" not in str(error.value)
    assert not caplog.records  # the hub client's retries: tfm's one line says what happened
    assert logging.getLogger("huggingface_hub").level == level  # as it was


@pytest.fixture
def fake_toy(monkeypatch):
    """tfm.data.toy.generator stand-in: pairs are (english, german); counts its calls."""
    calls = []

    def generate(*, n_train, n_validation, n_test, seed):
        calls.append(seed)
        sizes = {"train": n_train, "validation": n_validation, "test": n_test}
        return {s: [(f"{s} {i} en", f"{s} {i} de") for i in range(n)] for s, n in sizes.items()}

    module = types.SimpleNamespace(generate=generate)
    monkeypatch.setitem(sys.modules, "tfm.data.toy.generator", module)
    monkeypatch.setattr(tfm.data.toy, "generator", module, raising=False)
    library_corpora._toy_corpus.cache_clear()
    yield calls
    library_corpora._toy_corpus.cache_clear()


def test_toy_splits_come_from_one_cached_call_and_swap_direction(fake_toy):
    pairs, _ = load("train", format="toy", src_lang="en", tgt_lang="de")
    assert pairs == [(f"train {i} en", f"train {i} de") for i in range(3)]
    pairs, report = load("validation", format="toy", src_lang="de", tgt_lang="en")
    assert pairs == [(f"validation {i} de", f"validation {i} en") for i in range(2)]
    assert len(load("test", format="toy")[0]) == 1
    assert fake_toy == [7]
    assert report.summary().startswith("validation: read 2 pairs from the toy corpus")


def test_toy_needs_english_and_german_and_a_missing_split_says_how_to_give_one(fake_toy):
    with pytest.raises(DataError, match="toy corpus .*English–German, but .* 'fr'/'en'"):
        load(format="toy", src_lang="fr", tgt_lang="en")
    with pytest.raises(DataError) as error:  # a config that names no test split
        load("test", format="toy", src_lang="en", tgt_lang="fr")
    assert str(error.value) == (
        "data.test is the built-in toy corpus (what a config that names no test split gets), "
        "which is English–German, but src_lang/tgt_lang are 'en'/'fr': give data.test in the "
        "config (or score files: tfm eval --src FILE --ref FILE)"
    )


def test_real_toy_corpus_swaps_direction():
    pytest.importorskip(
        "tfm.data.toy.generator", reason="tfm.data.toy.generator has not landed yet"
    )
    library_corpora._toy_corpus.cache_clear()
    toy = ToyConfig(n_train=20, n_validation=5, n_test=5, seed=1)
    en_de, report = load("validation", src_lang="en", tgt_lang="de", toy=toy, format="toy")
    de_en, _ = load("validation", src_lang="de", tgt_lang="en", toy=toy, format="toy")
    assert report.read == 5 and de_en == [(de, en) for en, de in en_de]


# --- bad data: a located error or a counted decision -------------------------------------------


def test_missing_file_or_folder_names_path_and_config_key(tmp_path):
    prefix = str(tmp_path / "train")
    with pytest.raises(DataError, match=rf"{prefix}.de: no such file .*data.train.path"):
        load(format="text", path=prefix)
    with pytest.raises(DataError, match=rf"{tmp_path}/x.tsv: no such file .*data.train.path"):
        load(format="tsv", path=str(tmp_path / "x.tsv"))
    with pytest.raises(DataError, match=rf"{tmp_path}/x: no such folder .*data.test.path"):
        load("test", format="disk", path=str(tmp_path / "x"))


def test_different_line_counts_name_both_files_and_counts(tmp_path):
    prefix = write_text(tmp_path, b"a\nb\nc\n", b"a\nb\n")
    with pytest.raises(DataError, match=rf"{prefix}.de has 3 lines but {prefix}.en has 2"):
        load(format="text", path=prefix)


@pytest.mark.parametrize("inner", ["\u2028", "\u2029", "\u0085", "\r", "\f", "\v"])
def test_only_newline_ends_a_line(tmp_path, inner):
    prefix = write_text(tmp_path, f"a{inner}b\nc\n".encode(), b"A\nC\n")
    pairs, _ = load(format="text", path=prefix)
    assert pairs == [(f"a{inner}b", "A"), ("c", "C")]


def test_crlf_bom_and_final_newline(tmp_path):
    prefix = write_text(tmp_path, b"\xef\xbb\xbfa\r\nb\r\n", b"A\nB")  # BOM+CRLF vs no final \n
    pairs, _ = load(format="text", path=prefix)
    assert pairs == [("a", "A"), ("b", "B")]
    path = tmp_path / "train.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"de": "a", "en": "A"}\r\n')
    assert load(format="jsonl", path=str(path))[0] == [("a", "A")]


def test_invalid_utf8_names_file_line_and_byte(tmp_path):
    prefix = write_text(tmp_path, b"gut\nsch\xf6n\n", b"good\nnice\n")
    with pytest.raises(DataError, match=rf"{prefix}.de:2: invalid UTF-8 at byte 4 of the line"):
        load(format="text", path=prefix)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_text_is_named_with_how_to_convert_it(tmp_path, encoding):
    english = "A dog.\nTwo cats.\n".encode(encoding)
    bom = b"" if encoding == "utf-16" else ("\ufeff".encode(encoding))  # utf-16 writes its own
    prefix = write_text(tmp_path, b"Ein Hund.\nZwei Katzen.\n", bom + english)
    with pytest.raises(DataError, match=rf"^{prefix}.en: UTF-16 text .*iconv -f UTF-16 -t UTF-8"):
        load(format="text", path=prefix)


def test_empty_side_drops_the_pair_and_whitespace_is_stripped(tmp_path):
    prefix = write_text(tmp_path, b" a  b \n\nc\n \t\nd\n", b"A\nB\n\nD\n  D2\t\n")
    pairs, report = load(format="text", path=prefix)
    assert pairs == [("a  b", "A"), ("d", "D2")]
    assert (report.read, report.kept, report.dropped) == (5, 2, {"empty": 3})


def test_nothing_left_is_an_error_with_the_counts(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("a\t \n\n \tb\n", encoding="utf-8")  # a blank line reads as an empty pair
    with pytest.raises(DataError, match=r"no pairs left for train: .*read 3 .*empty side: 3"):
        load(format="tsv", path=str(path))


# --- report ------------------------------------------------------------------------------------


def test_summary_line_and_later_drops():
    report = LoadReport(split="train", origin="data/train.{de,en}", read=29_000, kept=29_000)
    assert (
        report.summary()
        == "train: read 29,000 pairs from data/train.{de,en}, kept 29,000, dropped 0"
    )
    report.drop("empty", 2)
    report.drop("too long", 0)
    report.drop("too long", 1_500)
    assert report.summary() == (
        "train: read 29,000 pairs from data/train.{de,en}, kept 27,498, "
        "dropped 1,502 (empty side: 2, too long: 1,500)"
    )
    assert report.dropped == {"empty": 2, "too long": 1_500}
    with pytest.raises(ValueError, match="n=27499"):
        report.drop("too long", 27_499)


@pytest.mark.slow  # reads the real corpus; the text format's tests above use small files
@pytest.mark.skipif(not (MULTI30K / "train.de").exists(), reason="Multi30k not in shared/data")
def test_multi30k_train_is_read_whole_and_aligned():
    pairs, report = load(format="text", path=str(MULTI30K / "train"))
    assert (report.read, report.kept) == (29_000, 29_000)
    german = (MULTI30K / "train.de").read_bytes().decode("utf-8").split("\n")
    english = (MULTI30K / "train.en").read_bytes().decode("utf-8").split("\n")
    for line in (0, 14_321, 28_999):
        assert pairs[line] == (german[line].strip(), english[line].strip())

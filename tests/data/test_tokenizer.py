"""Tokenizer behaviour: natural-text round trips, fixed special ids, files, determinism, errors."""

from pathlib import Path

import pytest

from tfm.data.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    Tokenizer,
    train_tokenizer,
)
from tfm.errors import DataError

MULTI30K = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"

DE = [
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
    "Zwei junge, weiße Männer sind im Freien in der Nähe vieler Büsche.",
    "Ein Mädchen (etwa 5 Jahre alt) läuft über die Straße!",
    "Die Frau sagt: „Schöne Grüße aus Köln“ – und lacht.",
    "Ein Hund springt 1,5\u00a0m hoch; das ist groß.",
    "Über 120 Leute warten   auf den Zug um 12:30 Uhr?",
    "Ein Café in der Straße, ‚klein‘ aber fein.",
]
EN = [
    "A man in an orange hat starring at something.",
    "Two young, White males are outside near many bushes.",
    "A girl (about 5 years old) runs across the street!",
    'The woman says: "Greetings from Cologne" - and laughs.',
    "A dog jumps 1.5 m high; that's big.",
    "Over 120 people wait for the train at 12:30 p.m.?",
    "A café on the street, 'small' but fine.",
]


def collapse(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return train_tokenizer(DE, EN, vocab_size=300, min_frequency=1)


def test_round_trip_gives_natural_text(tok: Tokenizer) -> None:
    assert tok.decode_src(tok.encode_src(DE)) == [collapse(s) for s in DE]
    assert tok.decode_tgt(tok.encode_tgt(EN)) == [collapse(s) for s in EN]


def test_unseen_sentence_made_of_known_characters_round_trips(tok: Tokenizer) -> None:
    text = "Zwei Hunde, (ein großer) und ein kleiner, laufen 50 m: „Schön!“"
    assert tok.decode_src(tok.encode_src([text])) == [text]


def test_no_space_before_punctuation_and_no_subword_markers(tok: Tokenizer) -> None:
    decoded = tok.decode_tgt(tok.encode_tgt(EN))
    for text in decoded:
        assert "▁" not in text
        for mark in ".,;:!?)":
            assert f" {mark}" not in text


def test_decode_ignores_pad_bos_eos(tok: Tokenizer) -> None:
    ids = tok.encode_tgt(EN[:1])[0]
    framed = [BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]
    assert tok.decode_tgt([framed]) == tok.decode_tgt([ids]) == [EN[0]]


def test_special_ids_are_fixed_and_never_produced_from_text(tok: Tokenizer) -> None:
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert tok.src_pieces([0, 1, 2, 3]) == ["<pad>", "<s>", "</s>", "<unk>"]
    assert tok.tgt_pieces([0, 1, 2, 3]) == ["<pad>", "<s>", "</s>", "<unk>"]
    ids = tok.encode_src(["Ein <s> Mann </s>"])[0]
    assert BOS_ID not in ids and EOS_ID not in ids and PAD_ID not in ids


def test_encode_adds_no_framing(tok: Tokenizer) -> None:
    ids = tok.encode_src(["Ein Mann."])[0]
    assert ids and ids[0] != BOS_ID and ids[-1] != EOS_ID


def test_pieces_are_readable_subwords(tok: Tokenizer) -> None:
    ids = tok.encode_src(["Ein Mädchen läuft."])[0]
    pieces = tok.src_pieces(ids)
    assert "".join(pieces).replace("▁", " ").strip() == "Ein Mädchen läuft."
    assert pieces[-1] == "."


def test_unseen_character_becomes_one_unknown_id(tok: Tokenizer) -> None:
    ids = tok.encode_src(["Ein €€ Mann"])[0]
    assert ids.count(UNK_ID) == 1
    assert tok.decode_src([ids]) == ["Ein <unk> Mann"]


def test_joint_and_separate_vocabularies() -> None:
    joint = train_tokenizer(DE, EN, vocab_size=300, min_frequency=1)
    assert joint.joint and joint.src_vocab_size == joint.tgt_vocab_size <= 300
    separate = train_tokenizer(DE, EN, vocab_size=300, min_frequency=1, joint=False)
    assert not separate.joint
    assert separate.src_vocab_size != separate.tgt_vocab_size
    assert UNK_ID not in separate.encode_src(["ß"])[0]  # German letters: source vocabulary only
    assert UNK_ID in separate.encode_tgt(["ß"])[0]


@pytest.mark.parametrize("joint", [True, False])
def test_save_load_keeps_ids_and_fingerprint(tmp_path: Path, joint: bool) -> None:
    tok = train_tokenizer(DE, EN, vocab_size=300, min_frequency=1, joint=joint)
    written = tok.save(tmp_path)
    assert written == [tmp_path / "tokenizer.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.json"]
    loaded = Tokenizer.load(tmp_path)
    assert loaded.joint == joint
    assert loaded.fingerprint() == tok.fingerprint()
    assert loaded.encode_src(DE) == tok.encode_src(DE)
    assert loaded.encode_tgt(EN) == tok.encode_tgt(EN)


def test_training_is_deterministic_to_the_byte(tmp_path: Path) -> None:
    for name in ("a", "b"):
        train_tokenizer(DE, EN, vocab_size=300, min_frequency=1).save(tmp_path / name)
    first, second = ((tmp_path / n / "tokenizer.json").read_bytes() for n in ("a", "b"))
    assert first == second


def test_fingerprint_tells_vocabularies_apart(tok: Tokenizer) -> None:
    other = train_tokenizer(DE, EN, vocab_size=250, min_frequency=1)
    separate = train_tokenizer(DE, EN, vocab_size=300, min_frequency=1, joint=False)
    assert len({tok.fingerprint(), other.fingerprint(), separate.fingerprint()}) == 3


def test_empty_training_text_is_a_data_error() -> None:
    with pytest.raises(DataError, match="target text is empty"):
        train_tokenizer(DE, ["", "  "], joint=False)
    with pytest.raises(DataError, match="empty"):
        train_tokenizer([], [])


def test_vocab_smaller_than_alphabet_is_a_data_error() -> None:
    with pytest.raises(DataError, match=r"vocab_size=20 is too small.* need at least \d+"):
        train_tokenizer(DE, EN, vocab_size=20)


def test_load_missing_or_corrupt_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="tokenizer.json: tokenizer file not found"):
        Tokenizer.load(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(DataError, match="tokenizer.json: cannot read"):
        Tokenizer.load(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"format": "tfm-tokenizer"}', encoding="utf-8")
    with pytest.raises(DataError, match="tokenizer.json: corrupt"):
        Tokenizer.load(tmp_path)


def test_fingerprint_mismatch_is_a_data_error(tok: Tokenizer, tmp_path: Path) -> None:
    path = tok.save(tmp_path)[0]
    text = path.read_text(encoding="utf-8").replace(tok.fingerprint(), "0" * 64)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match="fingerprint"):
        Tokenizer.load(tmp_path)


def test_one_string_instead_of_a_list_is_refused(tok: Tokenizer) -> None:
    with pytest.raises(TypeError):
        tok.encode_src("Ein Mann")


def read_lines(name: str) -> list[str]:
    path = MULTI30K / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.slow  # reads the real corpus; the round-trip tests above use sentences like it
def test_multi30k_validation_round_trip_rate() -> None:
    # 8000-token joint BPE on the first 10k training pairs (the full 29k take about 2 s).
    train_de, train_en = read_lines("train.de")[:10_000], read_lines("train.en")[:10_000]
    val = read_lines("val.de") + read_lines("val.en")
    tok = train_tokenizer(train_de, train_en, vocab_size=8000)
    decoded = tok.decode_src(tok.encode_src(val))
    exact = sum(collapse(d) == collapse(s) for d, s in zip(decoded, val, strict=True))
    assert exact / len(val) >= 0.999, f"{exact}/{len(val)} exact"

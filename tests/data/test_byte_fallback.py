"""Every script: with byte fallback a character never seen in training round trips through its
UTF-8 bytes instead of becoming `<unk>`; when it is on by default; unspaced Japanese learns
merges inside the sentence."""

import pytest

from tfm.data.tokenizer import (
    BYTE_FALLBACK_MIN_VOCAB,
    BYTE_TOKENS,
    SPECIAL_TOKENS,
    UNK_ID,
    Tokenizer,
    train_tokenizer,
    wants_byte_fallback,
)
from tfm.errors import DataError

EN = [
    "The dog sees the cat.",
    "A woman reads a book in the garden.",
    "My brother bought a new car yesterday.",
    "Where is the station?",
    "I like green tea very much.",
] * 20
JA = [
    "犬が猫を見ています。",
    "女性が庭で本を読んでいます。",
    "兄は昨日新しい車を買いました。",
    "駅はどこですか。",
    "私は緑茶がとても好きです。",
] * 20
UNSEEN = [
    "私は寿司を食べたい。",  # Japanese: 寿, 司, 食, べ, た unseen
    "我喜欢喝绿茶。",  # Chinese (simplified forms unseen)
    "The café 🙂 has ŋ, ð and Ω — 100 € ✓",  # emoji, rare letters, symbols
    "Ünïcödé ẞ 𝔘 \U00010348",  # a capital sharp s, a letter outside the BMP
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return train_tokenizer(EN, JA, vocab_size=BYTE_FALLBACK_MIN_VOCAB, byte_fallback=True)


def test_ids_4_to_259_are_the_byte_tokens(tok: Tokenizer) -> None:
    assert tok.tgt_pieces(range(4 + 256)) == [*SPECIAL_TOKENS, *BYTE_TOKENS]
    assert BYTE_TOKENS[0xE7] == "<0xE7>"


def test_unseen_characters_of_any_script_round_trip(tok: Tokenizer) -> None:
    ids = tok.encode_tgt(UNSEEN)
    assert all(UNK_ID not in seq for seq in ids)
    assert tok.decode_tgt(ids) == UNSEEN
    assert tok.decode_src(tok.encode_src(UNSEEN)) == UNSEEN


def test_an_unseen_character_is_its_utf8_bytes(tok: Tokenizer) -> None:
    pieces = tok.tgt_pieces(tok.encode_tgt(["駅 寿"])[0])
    assert pieces == ["▁駅", "▁", "<0xE5>", "<0xAF>", "<0xBF>"]  # 寿 is E5 AF BF in UTF-8


def test_byte_token_text_is_ordinary_characters(tok: Tokenizer) -> None:
    ids = tok.encode_src(["<0x41>"])[0]  # every character unseen: six bytes, not one "A"
    assert tok.src_pieces(ids) == ["▁", *(f"<0x{ord(c):02X}>" for c in "<0x41>")]
    assert tok.decode_src([ids]) == ["<0x41>"]


def test_unspaced_japanese_learns_merges_inside_the_sentence(tok: Tokenizer) -> None:
    pieces = tok.tgt_pieces(tok.encode_tgt(["駅はどこですか。"])[0])
    assert pieces == ["▁駅はどこですか", "。"]  # one sentence seen 20 times: merged whole
    ids = tok.encode_tgt(["兄は駅で本を読んでいます。"])[0]  # a new sentence of known words
    assert len(ids) < len("兄は駅で本を読んでいます。") / 2


def test_without_byte_fallback_an_unseen_character_is_unknown() -> None:
    tok = train_tokenizer(EN, JA, vocab_size=BYTE_FALLBACK_MIN_VOCAB, byte_fallback=False)
    assert "<0x00>" not in tok.tgt_pieces(range(tok.tgt_vocab_size))
    assert tok.decode_tgt(tok.encode_tgt(["駅 寿"])) == ["駅 <unk>"]


@pytest.mark.parametrize(
    ("texts", "alphabet", "vocab_size", "wanted"),
    [
        (["abc abc", "cab"], "", 8000, False),  # every character at least twice
        (["abc abc", "cab x"], "", 8000, True),  # x once: unseen ones will come
        (["abc abc", "cab x"], "", BYTE_FALLBACK_MIN_VOCAB - 1, False),  # no room for bytes
        (["abc abc", "cab"], "abz", 8000, True),  # z in the corpus but not in the sample
        (["abc abc", "cab\t"], "", 8000, False),  # whitespace: the normalizer's business
    ],
)
def test_byte_fallback_is_on_when_training_text_has_rare_characters(
    texts: list[str], alphabet: str, vocab_size: int, wanted: bool
) -> None:
    assert wants_byte_fallback(texts, alphabet, vocab_size) is wanted


def test_the_default_decides_per_vocabulary() -> None:
    tok = train_tokenizer(EN, [*JA, "鯨"], vocab_size=BYTE_FALLBACK_MIN_VOCAB, joint=False)
    assert tok.src_pieces([4]) != ["<0x00>"]  # English: every letter seen twice
    assert tok.tgt_pieces([4]) == ["<0x00>"]  # 鯨 once


def test_byte_tokens_count_in_the_vocabulary_size() -> None:
    with pytest.raises(DataError, match=r"vocab_size=300 is too small.*256 byte tokens"):
        train_tokenizer(EN, JA, vocab_size=300, byte_fallback=True)

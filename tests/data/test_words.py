"""Words in every script: between spaces, and a character each where a script has no spaces."""

import unicodedata

from tfm.data.corpus_figures import UNSPACED
from tfm.data.words import UNSPACED_BLOCKS, word_count, words


def test_spaced_scripts_split_on_spaces():
    for text in ("the dog sees the cat .", "der Hund sieht größere Katzen", "Он читает книгу",
                 "הוא קורא ספר", "  two\tspaces  "):  # fmt: skip
        assert words(text) == text.split() and word_count(text) == len(text.split())


def test_a_script_without_spaces_counts_a_character_a_word():
    assert words("私はiPhoneを買った。") == ["私", "は", "iPhone", "を", "買", "っ", "た", "。"]
    assert words("我 爱 你") == ["我", "爱", "你"] == words("我爱你")
    assert words("ฉันรัก") == list("ฉันรัก")  # Thai: a code point each, marks included
    assert word_count("東京 in 2024年") == 5  # 東, 京, in, 2024, 年
    assert words("東京\u3000タワー") == ["東", "京", "タ", "ワ", "ー"]  # the ideographic space


def test_the_blocks_hold_the_letters_of_the_scripts_the_figures_call_unspaced():
    """The recipe's corpus figures name a letter's script by its Unicode name; every letter of
    those scripts lies in one of the blocks, and the only other letters in them are those of
    the CJK punctuation and full-width blocks (written among CJK text), the old Kana of the
    Kana supplement (hentaigana) and the prolonged sound mark ー."""

    def inside(code: int) -> bool:
        return any(first <= code <= last for first, last in UNSPACED_BLOCKS)

    for code in range(0x110000):
        char = chr(code)
        if not char.isalpha():
            continue
        script = unicodedata.name(char, "").split(" ", 1)[0]
        if script in UNSPACED:
            assert inside(code), (hex(code), unicodedata.name(char))
        elif inside(code):
            blocks = ((0x3001, 0x303F), (0xFF01, 0xFF9F), (0x1AFF0, 0x1B16F))
            among_cjk = char == "ー" or any(first <= code <= last for first, last in blocks)
            assert among_cjk, (hex(code), unicodedata.name(char))

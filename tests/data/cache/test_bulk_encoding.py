"""The data cache's fast paths give exactly what the slow ones give: `BulkEncoder` the tokenizer's
own ids (its normalizer run only on sentences it would change, its pre-tokenizer as one regular
expression, each piece segmented once), and `characters` the set of a text's characters."""

import random
import sys

import numpy as np
import pytest
from tokenizers import AddedToken, models, pre_tokenizers
from tokenizers import Tokenizer as HfTokenizer

from tfm.data.cache import bulk_encoding
from tfm.data.cache.bulk_encoding import (
    ALONE,
    DIGIT,
    OTHER_SPACES,
    PUNCTUATION,
    WORD,
    BulkEncoder,
    classify,
    fits,
    needs_normalizing,
)
from tfm.data.tokenizer import train_tokenizer
from tfm.data.toy.generator import generate

MESSY = [
    "der  Hund",  # two spaces
    " der Hund",
    "der Hund ",
    "der\tHund",
    "der\u00a0Hund",  # no-break space
    "der\u2003Hund",  # em space
    "Gro\u0308sse",  # o and a combining diaeresis: NFD
    "der\x1cHund",  # Python's whitespace, not the normalizer's: encoded with it all the same
]


@pytest.mark.parametrize(
    ("texts", "changed"),
    [
        (["der Hund sieht", "GROSS . ROT"], []),
        (["Größe", "", "naïve café"], []),  # NFC, and an empty text
        ([], []),
        *[(["ok", messy, "gut"], [1]) for messy in MESSY],
        (["ok ", " gut", "ja"], [0, 1]),  # a space that ends one text, one that starts the next
        (["a  b", "c", "d\u00a0e", "Gro\u0308sse", "f"], [0, 2, 3]),
    ],
)
def test_needs_normalizing_names_the_texts_the_normalizer_would_change(texts, changed):
    assert needs_normalizing(texts) == changed


def test_other_spaces_are_every_whitespace_but_the_space():
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace() and c != 32]
    assert OTHER_SPACES == "".join(spaces)


@pytest.fixture(scope="module")
def toy():
    """A small joint BPE learned from toy German and English, with merges of the space marker
    and punctuation ("▁(") and of digits, and more toy German to encode."""
    pairs = generate(n_train=600, n_validation=0, n_test=0, seed=4)["train"]
    english, german = [en for en, _ in pairs], [de for _, de in pairs]
    marks = ["der Hund ( 12 ) , « 345 » . ! ? 67er 8.9"] * 40
    tokenizer = train_tokenizer(
        english[:400], german[:400] + marks, vocab_size=320, min_frequency=1
    )
    return tokenizer.bpe_models[0], german


JAPANESE = ["犬が猫を見ています。", "駅はどこですか？", "私は緑茶がとても好きです。"] * 10


@pytest.fixture(scope="module")
def bytes_toy():
    """The toy's BPE with byte fallback, learnt from unspaced Japanese as well: characters it
    never saw encode as their UTF-8 bytes, inside a piece or as the whole of one."""
    pairs = generate(n_train=600, n_validation=0, n_test=0, seed=4)["train"]
    english, german = [en for en, _ in pairs], [de for _, de in pairs]
    tokenizer = train_tokenizer(
        english[:400], german[:400] + JAPANESE, vocab_size=600, min_frequency=1, byte_fallback=True
    )
    model = tokenizer.bpe_models[0]
    assert model.token_to_id("<0x00>") == 4
    japanese = ["寿司を食べたい。犬が好きです", "私は駅で猫を見た", "鯨🙂 Wal", "ŋð Ω 𝔘"]
    return model, [*german, *japanese]


BOTH = pytest.mark.parametrize("tokenizer", ["toy", "bytes_toy"])


def reference(model: HfTokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in model.encode_batch_fast(texts, add_special_tokens=False)]


def rows(flat: np.ndarray, lengths: np.ndarray) -> list[list[int]]:
    assert flat.dtype == lengths.dtype == np.int64 and lengths.sum() == len(flat)
    return [row.tolist() for row in np.split(flat, np.cumsum(lengths)[:-1])] if len(lengths) else []


EDGES = [
    "",  # empty: left to tokenizers
    " ",  # empty once normalized
    "der Hund\u2581bellt",  # the space marker itself
    "\u2581Hund",
    "Zimmer 12, 3.5 m\u00b2 und 2019er Wein",  # digits glued to letters; ² is a digit to tokenizers
    "\u0663\u0664 Katzen \u216b",  # Arabic-Indic digits, a Roman numeral
    "((Hund)) ... !? \u00abKatze\u00bb \u201eja\u201c \u2014 \u00bfno?",  # runs of punctuation
    "a+b=c $5 \u20ac 100% #1 @home ~x^y`z|",  # symbols are word characters, % is punctuation
    "q\u0308 Gro\u0308\u00dfe",  # a combining mark NFC keeps, and one it composes
    "\U0001f642\U0001f642 \u732b \u0416\u0443\u043a",  # emoji, CJK, Cyrillic: unseen in training
    "Hund\x1cKatze\x00Maus",  # a separator the normalizer keeps, NUL
    "..",
    "7",
    "\u2581",
]


@BOTH
def test_bulk_encoding_gives_the_tokenizers_ids(tokenizer, request):
    model, german = request.getfixturevalue(tokenizer)
    texts = [*german[:200], *MESSY, *EDGES, "Ein Hund  läuft.", *german[200:]]
    encoder = BulkEncoder(model)
    assert fits(model) and encoder.fast
    assert rows(*encoder.encode(texts)) == reference(model, texts)
    # The messy ones, " ", the decomposed "o\u0308", "\x1c" and the two spaces of the last.
    assert len(needs_normalizing(texts)) == len(MESSY) + 4
    # After the first chunk: one of only plain sentences, one with none, and an empty one.
    assert rows(*encoder.encode(german[300:])) == reference(model, german[300:])
    assert rows(*encoder.encode(EDGES[:4])) == reference(model, EDGES[:4])
    assert rows(*encoder.encode([])) == []


POOL = (
    "abcdeHUNDäöüßéñøå" + "0123456789\u0663\u00b2\u216b"
    + ".,;:!?()[]{}\"'-\u2014\u2026\u00ab\u00bb\u201e\u201c\u00bf/&*%#@_"
    + "+=<>|~^`$\u20ac\u00a7\u00b0" + "\u2581\u0308\u0301\U0001f642\u732b\x1c\x00\ue000"
    + "犬が猫駅寿司。？"  # unspaced; the byte fallback BPE knows some (not 寿司)
    + "    " + "\t\n\u00a0\u3000"
)  # fmt: skip


@BOTH
def test_random_text_gives_the_tokenizers_ids(tokenizer, request):
    """Sentences drawn from letters, digits, punctuation and symbols of many scripts, spaces of
    every kind, the space marker, combining marks and characters the BPE never saw."""
    model, _ = request.getfixturevalue(tokenizer)
    rng = random.Random(7)
    texts = ["".join(rng.choices(POOL, k=rng.randint(0, 30))) for _ in range(3000)]
    encoder = BulkEncoder(model)
    for start in range(0, len(texts), 1000):
        chunk = texts[start : start + 1000]
        assert rows(*encoder.encode(chunk)) == reference(model, chunk)


def test_forgetting_the_pieces_changes_no_id(toy, monkeypatch):
    model, german = toy
    monkeypatch.setattr(bulk_encoding, "MAX_PIECES", 20)
    cleared, clear = [], bulk_encoding.Segmentations._clear

    def counted(self):
        cleared.append(len(getattr(self, "index", ())))
        clear(self)

    monkeypatch.setattr(bulk_encoding.Segmentations, "_clear", counted)
    encoder = BulkEncoder(model)
    for start in range(0, 600, 100):
        chunk = german[start : start + 100]
        assert rows(*encoder.encode(chunk)) == reference(model, chunk)
    assert len(cleared) == 6 and min(cleared[1:]) > 20  # started afresh before every chunk


def test_a_tokenizer_that_is_not_tfms_pipeline_is_left_to_tokenizers(toy):
    model, german = toy
    words = HfTokenizer(models.WordLevel({"[UNK]": 0, "Hund": 1, ".": 2}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    added = HfTokenizer.from_str(model.to_str())
    added.add_tokens([AddedToken("Hund")])  # matched before pre-tokenizing: not per piece
    texts = [*german[:50], "Der Hund.", "Hunde  Hund"]
    for tok in (words, added):
        encoder = BulkEncoder(tok)
        assert not fits(tok) and not encoder.fast
        assert rows(*encoder.encode(texts)) == reference(tok, texts)


@pytest.mark.parametrize(
    ("char", "kind"),
    [(".", PUNCTUATION), ("\u00bf", PUNCTUATION), ("7", DIGIT), ("\u00b2", DIGIT),
     ("a", WORD), ("$", WORD), ("\u2581", ALONE), ("\n", ALONE)],
)  # fmt: skip
def test_characters_are_classified_by_the_pre_tokenizer(toy, char, kind):
    assert classify(toy[0], char) == kind


def test_characters_are_those_of_the_text():
    text = "Größe 🙂 naïve\u3000\t\x00 Katze 🙂"
    assert bulk_encoding.characters(text) == set(text) and bulk_encoding.characters("") == set()

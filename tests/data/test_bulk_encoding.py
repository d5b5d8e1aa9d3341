"""The data cache's fast paths give exactly what the slow ones give: `BulkEncoder` the tokenizer's
own ids (its normalizer left out only for sentences it would not change), and `characters` the
set of a text's characters."""

import sys

import pytest

from tfm.data import store
from tfm.data.bulk_encoding import OTHER_SPACES, BulkEncoder, needs_normalizing
from tfm.data.tokenizer import train_tokenizer
from tfm.data.toy import generate

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


def test_bulk_encoding_gives_the_tokenizers_ids():
    pairs = generate(n_train=400, n_validation=0, n_test=0, seed=4)["train"]
    english, german = [en for en, _ in pairs], [de for _, de in pairs]
    tokenizer = train_tokenizer(english, german, vocab_size=300, min_frequency=1, joint=True)
    texts = [*german[:200], *MESSY, "Ein Hund  läuft.", *german[200:]]
    (model, _) = tokenizer.bpe_models
    ids = BulkEncoder(model).encode(texts)
    assert ids == tokenizer.encode_tgt(texts) and len(ids) == len(texts)
    assert len(needs_normalizing(texts)) == len(MESSY) + 1


def test_characters_are_those_of_the_text():
    text = "Größe 🙂 naïve\u3000\t\x00 Katze 🙂"
    assert store.characters(text) == set(text) and store.characters("") == set()

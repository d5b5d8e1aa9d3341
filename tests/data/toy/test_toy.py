"""The toy corpus: German grammar pinned on concrete sentences, and what the corpus guarantees."""

import collections
import itertools
import re

import pytest
from toy_parser import parse, translate

from tfm.data.toy import generator as toy
from tfm.data.toy import lexicon as toy_lexicon
from tfm.data.toy.generator import generate

# (rule, English, German): each rule of the toy grammar on a sentence a German speaker can check.
GRAMMAR = [
    (
        "definite nom m, acc f",
        "the big dog sees the small cat",
        "Der große Hund sieht die kleine Katze",
    ),
    ("definite acc m", "i see the dog", "Ich sehe den Hund"),
    ("definite nom n, acc n", "the child reads the book", "Das Kind liest das Buch"),
    (
        "definite nom f, weak acc m",
        "the old woman has the new ball",
        "Die alte Frau hat den neuen Ball",
    ),
    ("definite plural nom, acc", "the children see the dogs", "Die Kinder sehen die Hunde"),
    ("definite dat m", "the child follows the old dog", "Das Kind folgt dem alten Hund"),
    ("definite dat f", "the old man helps the young woman", "Der alte Mann hilft der jungen Frau"),
    (
        "definite dat n",
        "the girl plays with the small horse",
        "Das Mädchen spielt mit dem kleinen Pferd",
    ),
    (
        "definite dat plural -n",
        "the dog plays with the children",
        "Der Hund spielt mit den Kindern",
    ),
    ("indefinite nom m", "a big dog sleeps", "Ein großer Hund schläft"),
    ("indefinite nom f", "a small cat sleeps", "Eine kleine Katze schläft"),
    ("indefinite nom n", "a small horse runs", "Ein kleines Pferd läuft"),
    (
        "indefinite acc m, an",
        "an old woman sees a young man",
        "Eine alte Frau sieht einen jungen Mann",
    ),
    ("indefinite acc n, colour", "she has a red car", "Sie hat ein rotes Auto"),
    ("indefinite acc f, colour", "we have a black cat", "Wir haben eine schwarze Katze"),
    ("indefinite dat m", "the cat sits on a chair", "Die Katze sitzt auf einem Stuhl"),
    ("indefinite dat f", "the boy helps a woman", "Der Junge hilft einer Frau"),
    (
        "indefinite dat n",
        "the dog sleeps in a small house",
        "Der Hund schläft in einem kleinen Haus",
    ),
    ("adjective stem in -e", "a tired dog sleeps", "Ein müder Hund schläft"),
    ("two adjectives", "the cats see the big red ball", "Die Katzen sehen den großen roten Ball"),
    ("number, strong nom plural", "two big dogs sleep", "Zwei große Hunde schlafen"),
    (
        "number, strong dat plural",
        "the cat plays with three small dogs",
        "Die Katze spielt mit drei kleinen Hunden",
    ),
    ("bare plurals", "hungry dogs eat cakes", "Hungrige Hunde essen Kuchen"),
    ("weak masculine acc", "the boy sees the lion", "Der Junge sieht den Löwen"),
    ("weak masculine dat", "the girl plays with a bear", "Das Mädchen spielt mit einem Bären"),
    ("pronoun you, irregular essen", "you eat an apple", "Du isst einen Apfel"),
    ("pronoun he, irregular lesen", "he reads a book", "Er liest ein Buch"),
    ("pronoun she, irregular laufen", "she runs", "Sie läuft"),
    ("pronoun it", "it sleeps", "Es schläft"),
    ("pronoun we", "we sleep", "Wir schlafen"),
    ("pronoun they", "they laugh", "Sie lachen"),
    ("object pronouns acc", "he sees her because you see me", "Er sieht sie, weil du mich siehst"),
    (
        "object pronouns dat",
        "she plays with him because they help you",
        "Sie spielt mit ihm, weil sie dir helfen",
    ),
    ("irregular haben", "the man has a dog", "Der Mann hat einen Hund"),
    (
        "irregular mögen",
        "i like the cat because you like the dog",
        "Ich mag die Katze, weil du den Hund magst",
    ),
    ("irregular lächeln", "i smile", "Ich lächle"),
    (
        "e-insertion, s-stem",
        "you find a key because you dance",
        "Du findest einen Schlüssel, weil du tanzt",
    ),
    (
        "copula with adjective",
        "i am hungry because you are tired",
        "Ich bin hungrig, weil du müde bist",
    ),
    ("copula with place, im", "the dogs are in the garden", "Die Hunde sind im Garten"),
    ("in der, no contraction", "the cat is in the kitchen", "Die Katze ist in der Küche"),
    ("im with a verb", "the dog sleeps in the house", "Der Hund schläft im Haus"),
    (
        "nicht after definite object",
        "the dog does not see the ball",
        "Der Hund sieht den Ball nicht",
    ),
    ("nicht, intransitive", "the dog does not sleep", "Der Hund schläft nicht"),
    (
        "nicht before a place",
        "the dog does not sleep in the house",
        "Der Hund schläft nicht im Haus",
    ),
    (
        "nicht between object and place",
        "the dog does not see the ball in the garden",
        "Der Hund sieht den Ball nicht im Garten",
    ),
    ("nicht after a pronoun", "i do not see it", "Ich sehe es nicht"),
    ("nicht with be", "the cat is not hungry", "Die Katze ist nicht hungrig"),
    ("not a -> kein acc", "the women do not see a bird", "Die Frauen sehen keinen Vogel"),
    ("not a -> kein dat", "the man does not help a child", "Der Mann hilft keinem Kind"),
    ("not + plural -> keine", "dogs do not eat cakes", "Hunde essen keine Kuchen"),
    ("no -> kein nom", "no dog sleeps", "Kein Hund schläft"),
    ("no -> kein acc f", "the man sees no cat", "Der Mann sieht keine Katze"),
    ("no + plural adjective", "the cat sees no big dogs", "Die Katze sieht keine großen Hunde"),
    (
        "weil, verb last",
        "the dog sleeps because the cat does not see the ball",
        "Der Hund schläft, weil die Katze den Ball nicht sieht",
    ),
    (
        "weil, nicht before place",
        "the dog is tired because the cat does not sleep in the house",
        "Der Hund ist müde, weil die Katze nicht im Haus schläft",
    ),
    (
        "weil, kein",
        "she sleeps because she does not have a bed",
        "Sie schläft, weil sie kein Bett hat",
    ),
    (
        "dass, irregular wissen",
        "i know that the dog sees the cat",
        "Ich weiß, dass der Hund die Katze sieht",
    ),
    (
        "dass, negated copula",
        "we think that the children are not tired",
        "Wir denken, dass die Kinder nicht müde sind",
    ),
    (
        "negated that-verb",
        "you do not say that i am hungry",
        "Du sagst nicht, dass ich hungrig bin",
    ),
]


@pytest.mark.parametrize(("english", "german"), [pytest.param(e, g, id=r) for r, e, g in GRAMMAR])
def test_translate_applies_the_german_grammar(english, german):
    assert translate(english) == german


def test_translate_ignores_case_and_one_final_full_stop():
    assert translate("The dog sees the cat.") == "Der Hund sieht die Katze"


def test_unknown_words_are_named():
    with pytest.raises(ValueError, match="unknown word 'unicorn'"):
        translate("the dog sees the unicorn")


@pytest.mark.parametrize(
    ("english", "message"),
    [
        ("the dog see the cat", "must be 'sees' to agree"),
        ("the dogs does not sleep", "'do' does not agree"),
        ("dog sleeps", "needs 'the', 'a' or 'no'"),
        ("a dogs sleep", "needs a singular noun"),
        ("two dog sleep", "a number needs a plural noun"),
        ("a apple falls", "needs 'an'"),
        ("the dog does not see no cat", "double negation"),
        ("the dog does not see two cats", "counted object"),
        ("i think the dog sleeps", "expected 'that'"),
        ("the dog sleeps the cat", "expected 'because' or the end"),
        ("the dog sees", "expected a noun phrase but found the end"),
        ("me see the dog", "expected a subject pronoun"),
        ("the dog sees she", "expected an object pronoun"),
        ("the dog is", "an adjective or a preposition"),
        ("the dog does not be tired", "a verb in its base form"),
    ],
)
def test_sentences_outside_the_grammar_are_rejected_with_the_reason(english, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        translate(english)


@pytest.fixture(scope="module")
def corpus():
    return generate()


def test_default_corpus_has_the_requested_sizes(corpus):
    assert {name: len(pairs) for name, pairs in corpus.items()} == {
        "train": 20_000,
        "validation": 1_000,
        "test": 1_000,
    }


def test_translate_reproduces_every_generated_pair(corpus):
    pairs = itertools.chain.from_iterable(corpus.values())
    assert [(en, de) for en, de in pairs if translate(en) != de] == []


def test_no_sentence_is_in_two_splits_or_twice_in_one(corpus):
    english = [en for pairs in corpus.values() for en, _ in pairs]
    assert len(set(english)) == len(english) == 22_000


def test_each_english_sentence_has_one_german_across_seeds(corpus):
    german = {}
    other_seeds = [generate(2_000, 100, 100, seed=seed) for seed in (1, 2)]
    for splits in [corpus, *other_seeds]:
        for en, de in itertools.chain.from_iterable(splits.values()):
            assert german.setdefault(en, de) == de, en


def test_same_seed_gives_the_same_corpus_and_another_seed_a_different_one():
    assert generate(500, 50, 50, seed=7) == generate(500, 50, 50, seed=7)
    assert generate(500, 50, 50, seed=7) != generate(500, 50, 50, seed=8)


def test_text_format(corpus):
    for en, de in corpus["validation"]:
        assert re.fullmatch(r"[a-z]+( [a-z]+)*", en), en
        assert de[0].isupper() and de[-1].isalpha(), de
        assert all(word in ("weil", "dass") for word in re.findall(r", (\w+)", de)), de


def test_sentences_are_short(corpus):
    lengths = [len(en.split()) for en, _ in corpus["train"]]
    assert max(lengths) <= toy.MAX_WORDS
    assert sum(3 <= n <= 12 for n in lengths) / len(lengths) > 0.85


CONSTRUCTIONS = {
    "weil": r", weil ",
    "dass": r", dass ",
    "nicht": r"\bnicht\b",
    "kein": r"\b[Kk]ein",
    "im": r"\bim\b",
    "number": r"\b([Zz]wei|[Dd]rei|[Vv]ier|[Ff]ünf)\b",
    "dative object": r"\b(hilft|folgt|dankt|antwortet|helfen|folgen|danken|antworten)\b",
    "copula": r"\b(bin|bist|ist|sind)\b",
    "mit": r"\bmit\b",
    "weak masculine": r"\b(Löwen|Bären|Affen|Hasen|Elefanten|Jungen|Studenten|Nachbarn)\b",
    **{pronoun: rf"^{pronoun} " for pronoun in ("Ich", "Du", "Er", "Sie", "Es", "Wir")},
    "dative plural": r"\b(den|mit) \w*n\b",
}


def test_every_construction_is_frequent_enough_to_learn(corpus):
    counts = collections.Counter(
        name
        for _, de in corpus["train"]
        for name, rule in CONSTRUCTIONS.items()
        if re.search(rule, de)
    )
    assert {name: counts[name] for name in CONSTRUCTIONS if counts[name] < 200} == {}


def test_lexicon_has_at_least_150_entries():
    english = [en for en, _ in toy_lexicon.entries()]
    assert len(english) == len(set(english)) >= 150


def test_every_english_word_form_belongs_to_one_entry():
    owners = collections.defaultdict(set)
    classes = [
        (toy_lexicon.NOUNS, lambda n: {n.english, n.english_plural}),
        (toy_lexicon.VERBS, lambda v: {v.english, *v.english_forms.values()}),
        (toy_lexicon.ADJECTIVES, lambda a: {a.english}),
        (toy_lexicon.PRONOUNS, lambda p: {p.english, p.english_object}),
        (toy_lexicon.PREPOSITIONS, lambda p: {p.english}),
    ]
    for index, (table, forms) in enumerate(classes):
        for key, entry in table.items():
            for form in forms(entry):
                owners[form].add((index, key))
    for word in [*toy_lexicon.NUMBERS, "the", "a", "an", "no", "not", "do", "does", "that"]:
        owners[word].add(("function word", word))
    assert {form: keys for form, keys in owners.items() if len(keys) > 1} == {}


def test_impossible_sizes_raise_with_the_numbers(monkeypatch):
    few = [parse(en) for en in ("the dog sleeps", "the cat sleeps", "i sleep")]
    monkeypatch.setattr(toy, "draw_sentence", lambda rng: rng.choice(few))
    with pytest.raises(ValueError, match=r"only 3 distinct sentences .* 5 were asked for"):
        generate(n_train=3, n_validation=1, n_test=1)


def test_negative_sizes_raise():
    with pytest.raises(ValueError, match="'test': -1"):
        generate(n_train=10, n_validation=1, n_test=-1)

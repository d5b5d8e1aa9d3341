"""A synthetic English→German corpus with real German grammar, so `tfm train` works offline.

    splits = generate(n_train=20000, n_validation=1000, n_test=1000, seed=0)
    translate("the big dog sees the small cat")  # "Der große Hund sieht die kleine Katze"

A sentence is one clause, optionally followed by "because" and a second clause (German "weil",
verb last). A clause is a subject, a present-tense verb and what the verb takes: an object
(accusative, or dative for help/follow/thank/answer), an adjective or a prepositional phrase after
"be", or "that" and a clause (German "dass", verb last) after think/know/say/hope/believe.
Clauses that are not a that-clause's head may end in one dative prepositional phrase.

Negation is one fixed rule: "not" on the verb becomes "kein" when the object is indefinite ("a
bird", "birds"; "sehen keinen Vogel"), otherwise "nicht" after the object and before any
prepositional phrase ("sieht den Ball nicht im Garten", "weil die Katze den Ball nicht sieht").
"no" before a noun is "kein" anywhere. Double negation and a negated counted object ("does not
see two cats") are outside the grammar.

Text format: English is lowercase, space-separated words, no punctuation. German has capitalised
nouns, a capitalised first word, a comma before "weil" and "dass", and no final full stop.
`translate` ignores the case of its input and one final full stop. The same English sentence
always has the same German one, so a perfect model exists.
"""

import functools
import itertools
import random
from dataclasses import dataclass, replace
from typing import NoReturn

from tfm.data import toy_lexicon as lex

MAX_WORDS = 14  # longer draws are redrawn, so a small model sees short sentences


@dataclass(frozen=True)
class NounPhrase:
    noun: str  # English singular, a key of lex.NOUNS
    determiner: str = "the"  # "the", "a", "no", a number word, or "" (bare plural)
    plural: bool = False
    adjectives: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pronoun:
    word: str  # English subject form, a key of lex.PRONOUNS


Phrase = NounPhrase | Pronoun


@dataclass(frozen=True)
class PrepositionalPhrase:
    preposition: str
    phrase: Phrase  # always dative


@dataclass(frozen=True)
class Clause:
    subject: Phrase
    verb: str  # English base form, a key of lex.VERBS
    object: Phrase | None = None
    adjective: str = ""  # after "be": "the dog is tired"
    adverbial: PrepositionalPhrase | None = None
    that: "Clause | None" = None  # after think/know/say/hope/believe
    negated: bool = False


@dataclass(frozen=True)
class Sentence:
    main: Clause
    reason: Clause | None = None  # the "because" clause


def translate(english: str) -> str:
    """The German translation of an English toy-grammar sentence.

    Raises ValueError naming the unknown word, or what was expected where the sentence leaves
    the grammar.
    """
    return render_german(parse(english))


def generate(
    n_train: int = 20_000, n_validation: int = 1_000, n_test: int = 1_000, seed: int = 0
) -> dict[str, list[tuple[str, str]]]:
    """`n_train`, `n_validation` and `n_test` (English, German) pairs under "train", "validation"
    and "test".

    No English sentence occurs twice, within a split or across splits. The same sizes and seed
    give the same corpus. Raises ValueError if the grammar cannot yield that many distinct
    sentences of at most MAX_WORDS words.
    """
    sizes = {"train": n_train, "validation": n_validation, "test": n_test}
    if any(size < 0 for size in sizes.values()):
        raise ValueError(f"split sizes must be >= 0, got {sizes}")
    total = sum(sizes.values())
    rng = random.Random(seed)
    pairs: dict[str, str] = {}
    budget = 10 * total + 1_000
    for _ in range(budget):
        if len(pairs) == total:
            break
        sentence = _draw_sentence(rng)
        english = render_english(sentence)
        if len(english.split()) <= MAX_WORDS:
            german = render_german(sentence)  # one English sentence, one German: assert it
            assert pairs.setdefault(english, german) == german, f"two Germans for {english!r}"
    if len(pairs) < total:
        raise ValueError(
            f"the toy grammar gave only {len(pairs)} distinct sentences in {budget} draws, "
            f"but {total} were asked for (n_train={n_train}, n_validation={n_validation}, "
            f"n_test={n_test}, seed={seed})"
        )
    items = list(pairs.items())  # drawn in order; cut into train, validation, test
    ends = itertools.accumulate(sizes.values())
    return {
        name: items[end - size : end] for (name, size), end in zip(sizes.items(), ends, strict=True)
    }


# --- rendering --------------------------------------------------------------------------------


def render_english(sentence: Sentence) -> str:
    words = _english_clause(sentence.main)
    if sentence.reason:
        words += ["because", *_english_clause(sentence.reason)]
    return " ".join(words)


def render_german(sentence: Sentence) -> str:
    words = _german_clause(sentence.main, subordinate=False)
    if sentence.reason:
        words[-1] += ","
        words += ["weil", *_german_clause(sentence.reason, subordinate=True)]
    text = " ".join(words)
    return text[0].upper() + text[1:]


def _person(phrase: Phrase) -> str:
    if isinstance(phrase, Pronoun):
        return lex.PRONOUNS[phrase.word].person
    return "3pl" if phrase.plural else "3sg"


def _english_clause(clause: Clause) -> list[str]:
    verb = lex.VERBS[clause.verb]
    person = _person(clause.subject)
    words = _english_phrase(clause.subject, subject=True)
    if not clause.negated:
        words.append(verb.english_forms[person])
    elif verb.valency == "copula":
        words += [verb.english_forms[person], "not"]
    else:
        words += ["does" if person == "3sg" else "do", "not", verb.english]
    if clause.object:
        words += _english_phrase(clause.object, subject=False)
    if clause.adjective:
        words.append(clause.adjective)
    if clause.adverbial:
        words += [clause.adverbial.preposition, *_english_phrase(clause.adverbial.phrase)]
    if clause.that:
        words += ["that", *_english_clause(clause.that)]
    return words


def _english_phrase(phrase: Phrase, subject: bool = False) -> list[str]:
    if isinstance(phrase, Pronoun):
        pronoun = lex.PRONOUNS[phrase.word]
        return [pronoun.english if subject else pronoun.english_object]
    noun = lex.NOUNS[phrase.noun]
    words = [*phrase.adjectives, noun.english_plural if phrase.plural else noun.english]
    if phrase.determiner == "a":
        return [_a_or_an(words[0]), *words]
    return [phrase.determiner, *words] if phrase.determiner else words


def _a_or_an(next_word: str) -> str:
    return "an" if next_word[0] in "aeiou" else "a"  # no "an hour" or "a unicorn" in the lexicon


def _german_clause(clause: Clause, subordinate: bool) -> list[str]:
    verb = lex.VERBS[clause.verb]
    finite = verb.german_forms[_person(clause.subject)]
    kein = clause.negated and _indefinite(clause.object)
    middle = []  # what stands between the finite verb and the end of a main clause
    if clause.object:
        obj = replace(clause.object, determiner="no") if kein else clause.object
        middle += _german_phrase(obj, "dat" if verb.valency == "dative" else "acc")
    if clause.negated and not kein:
        middle.append("nicht")
    if clause.adjective:
        middle.append(lex.ADJECTIVES[clause.adjective].german)
    if clause.adverbial:
        middle += _german_prepositional(clause.adverbial)
    subject = _german_phrase(clause.subject, "nom")
    words = [*subject, *middle, finite] if subordinate else [*subject, finite, *middle]
    if clause.that:
        words[-1] += ","
        words += ["dass", *_german_clause(clause.that, subordinate=True)]
    return words


def _indefinite(phrase: Phrase | None) -> bool:
    """A or bare plural: the determiners that "not" turns into "kein"."""
    return isinstance(phrase, NounPhrase) and phrase.determiner in ("a", "")


def _german_prepositional(adverbial: PrepositionalPhrase) -> list[str]:
    preposition = lex.PREPOSITIONS[adverbial.preposition].german
    first, *rest = _german_phrase(adverbial.phrase, "dat")
    contraction = lex.CONTRACTIONS.get((preposition, first))
    return [contraction, *rest] if contraction else [preposition, first, *rest]


def _german_phrase(phrase: Phrase, case: str) -> list[str]:
    if isinstance(phrase, Pronoun):
        return [getattr(lex.PRONOUNS[phrase.word], case)]
    noun = lex.NOUNS[phrase.noun]
    gender = "pl" if phrase.plural else noun.gender
    article = phrase.determiner if phrase.determiner in ("the", "a", "no") else ""
    words = [lex.ARTICLES[article, case, gender]] if article else []
    if phrase.determiner in lex.NUMBERS:
        words.append(lex.NUMBERS[phrase.determiner])
    ending = lex.ENDINGS[article, case, gender] if phrase.adjectives else ""
    words += [lex.inflect_adjective(lex.ADJECTIVES[a].german, ending) for a in phrase.adjectives]
    return [*words, lex.inflect_noun(noun, plural=phrase.plural, case=case)]


# --- parsing ----------------------------------------------------------------------------------

_NOUN_FORMS = {n.english: (n.english, False) for n in lex.NOUNS.values()}
_NOUN_FORMS |= {n.english_plural: (n.english, True) for n in lex.NOUNS.values()}
_VERB_FORMS = {form: v.english for v in lex.VERBS.values() for form in v.english_forms.values()}
_SUBJECT_PRONOUNS = {p.english: p.english for p in lex.PRONOUNS.values()}
_OBJECT_PRONOUNS = {p.english_object: p.english for p in lex.PRONOUNS.values()}
_FUNCTION_WORDS = {"the", "a", "an", "no", "not", "do", "does", "that", "because"}
_KNOWN = {*_NOUN_FORMS, *_VERB_FORMS, *lex.VERBS, *lex.ADJECTIVES, *lex.NUMBERS, *lex.PREPOSITIONS}
_KNOWN |= {*_SUBJECT_PRONOUNS, *_OBJECT_PRONOUNS, *_FUNCTION_WORDS}


def parse(english: str) -> Sentence:
    """The clause structure of an English toy-grammar sentence (see the module docstring)."""
    text = english.strip().lower().removesuffix(".")
    for word in text.split():
        if word not in _KNOWN:
            raise ValueError(f"unknown word {word!r} in {english!r}")
    return _Parser(text).sentence()


class _Parser:
    """Recursive descent over the words of one sentence; every method consumes what it returns."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.words = text.split()
        self.position = 0

    def peek(self) -> str:
        return self.words[self.position] if self.position < len(self.words) else ""

    def take(self) -> str:
        word = self.peek()
        self.position += 1
        return word

    def expect(self, word: str) -> None:
        if self.peek() != word:
            self.fail(repr(word))
        self.take()

    def sentence(self) -> Sentence:
        main = self.clause()
        reason = None
        if self.peek() == "because":
            self.take()
            reason = self.clause()
        if self.peek():
            self.fail("'because' or the end of the sentence")
        return Sentence(main, reason)

    def clause(self) -> Clause:
        subject = self.phrase(subject=True)
        verb, negated = self.verb_group(_person(subject))
        parts: dict = {}
        if verb.valency in ("accusative", "dative"):
            parts["object"] = self.phrase()
        if verb.valency == "that":
            self.expect("that")
            parts["that"] = self.clause()
        elif verb.valency == "copula" and self.peek() in lex.ADJECTIVES:
            parts["adjective"] = self.take()
        elif verb.valency == "copula" or self.peek() in lex.PREPOSITIONS:
            parts["adverbial"] = self.prepositional()
        clause = Clause(subject, verb.english, negated=negated, **parts)
        self.check_negation(clause)
        return clause

    def verb_group(self, person: str) -> tuple[lex.Verb, bool]:
        """The verb and whether "not" negates it, checking agreement with the subject."""
        if self.peek() in ("do", "does"):
            if self.take() != _do(person):
                self.error(f"{_do(person)!r} does not agree with the subject")
            self.expect("not")
            if self.peek() not in lex.VERBS or self.peek() == "be":
                self.fail("a verb in its base form after 'not'")
            return lex.VERBS[self.take()], True
        if self.peek() not in _VERB_FORMS:
            self.fail("a verb")
        verb = lex.VERBS[_VERB_FORMS[self.peek()]]
        if self.take() != verb.english_forms[person]:
            self.error(f"the verb must be {verb.english_forms[person]!r} to agree with the subject")
        negated = verb.valency == "copula" and self.peek() == "not"
        if negated:
            self.take()
        return verb, negated

    def prepositional(self) -> PrepositionalPhrase:
        if self.peek() not in lex.PREPOSITIONS:
            self.fail("an adjective or a preposition after 'be'")
        return PrepositionalPhrase(self.take(), self.phrase())

    def phrase(self, subject: bool = False) -> Phrase:
        pronouns, others = _SUBJECT_PRONOUNS, _OBJECT_PRONOUNS
        if not subject:
            pronouns, others = others, pronouns
        if self.peek() in pronouns:
            return Pronoun(pronouns[self.take()])
        if self.peek() in others:
            self.fail(f"{'a subject' if subject else 'an object'} pronoun")
        determiner = self.take() if self.peek() in ("the", "a", "an", "no", *lex.NUMBERS) else ""
        adjectives = []
        while self.peek() in lex.ADJECTIVES:
            adjectives.append(self.take())
        if self.peek() not in _NOUN_FORMS:
            self.fail("a noun" if determiner or adjectives else "a noun phrase")
        noun, plural = _NOUN_FORMS[self.peek()]
        self.check_determiner(determiner, plural, following=[*adjectives, self.take()])
        determiner = "a" if determiner == "an" else determiner
        return NounPhrase(noun, determiner, plural, tuple(adjectives))

    def check_determiner(self, determiner: str, plural: bool, following: list[str]) -> None:
        words = " ".join([determiner, *following]).strip()
        if determiner in ("a", "an") and determiner != _a_or_an(following[0]):
            self.error(f"{words!r} needs {_a_or_an(following[0])!r}")
        if determiner in ("a", "an") and plural:
            self.error(f"{words!r}: '{determiner}' needs a singular noun")
        if determiner in lex.NUMBERS and not plural:
            self.error(f"{words!r}: a number needs a plural noun")
        if not determiner and not plural:
            self.error(f"{words!r}: a singular noun needs 'the', 'a' or 'no'")

    def check_negation(self, clause: Clause) -> None:
        adverbial = clause.adverbial.phrase if clause.adverbial else None
        phrases = [clause.subject, clause.object, adverbial]
        if clause.negated and any(_determiner(p) == "no" for p in phrases):
            self.error("'not' and 'no' in one clause (double negation) are outside the grammar")
        if clause.negated and _determiner(clause.object) in lex.NUMBERS:
            self.error("a negated verb with a counted object is outside the grammar")

    def fail(self, expected: str) -> NoReturn:
        found = f"{self.peek()!r} (word {self.position + 1})" if self.peek() else "the end"
        self.error(f"expected {expected} but found {found}")

    def error(self, message: str) -> NoReturn:
        raise ValueError(f"{message} in {self.text!r}")


def _do(person: str) -> str:
    return "does" if person == "3sg" else "do"


def _determiner(phrase: Phrase | None) -> str | None:
    return phrase.determiner if isinstance(phrase, NounPhrase) else None


# --- sampling ---------------------------------------------------------------------------------
# The weights keep every construction frequent: in 20,000 sentences each one appears hundreds of
# times (tests/data/test_toy.py counts them).

_VALENCIES = {"intransitive": 3, "accusative": 4, "dative": 1, "copula": 2}
_DETERMINERS = {"the": 10, "a": 5, "no": 2, **dict.fromkeys(lex.NUMBERS, 0.25), "": 2}
_VERBS_BY_VALENCY = {
    valency: [verb for verb in lex.VERBS.values() if verb.valency == valency]
    for valency in [*_VALENCIES, "that"]
}
_PLURAL_RATE = {"the": 0.35, "no": 0.3, "a": 0.0, "": 1.0, **dict.fromkeys(lex.NUMBERS, 1.0)}


def _draw_sentence(rng: random.Random) -> Sentence:
    shape = rng.random()
    if shape < 0.2:
        return Sentence(_draw_clause(rng, "that"))
    reason = _draw_clause(rng, _draw_valency(rng)) if shape < 0.45 else None
    return Sentence(_draw_clause(rng, _draw_valency(rng)), reason)


def _draw_valency(rng: random.Random) -> str:
    return rng.choices(list(_VALENCIES), weights=list(_VALENCIES.values()))[0]


def _draw_clause(rng: random.Random, valency: str) -> Clause:
    verb = rng.choice(_VERBS_BY_VALENCY[valency])
    negated = rng.random() < 0.3
    place = valency == "copula" and rng.random() < 0.4  # "the cup is on the table"
    subjects = tuple(kind for kind in verb.subjects if not place or kind != "place")
    subject = _draw_phrase(rng, subjects, pronouns=0.35, negative=not negated)
    parts: dict = {}
    if valency in ("accusative", "dative"):
        parts["object"] = _draw_phrase(
            rng,
            verb.objects,
            pronouns=0.15,
            avoid=subject,
            negative=not negated,
            counted=not negated,
        )
    if valency == "that":
        parts["that"] = _draw_clause(rng, _draw_valency(rng))
    elif valency == "copula" and not place:
        kind = lex.NOUNS[subject.noun].kind if isinstance(subject, NounPhrase) else "person"
        parts["adjective"] = rng.choice(_adjectives_for(kind)[0] + _adjectives_for(kind)[1])
    elif valency == "copula" or rng.random() < 0.3:
        preposition = rng.choice(_prepositions_for(verb.english))
        phrase = _draw_phrase(rng, preposition.kinds, pronouns=0.1, avoid=subject, negative=False)
        parts["adverbial"] = PrepositionalPhrase(preposition.english, phrase)
    return Clause(subject, verb.english, negated=negated, **parts)


def _draw_phrase(
    rng: random.Random,
    kinds: tuple[str, ...],
    *,
    pronouns: float,
    avoid: Phrase | None = None,
    negative: bool = True,
    counted: bool = True,
) -> Phrase:
    """A noun phrase of one of `kinds`, or a pronoun (not `avoid`, so no "i see me")."""
    if "person" in kinds and rng.random() < pronouns:
        return rng.choice([p for p in _pronouns_for(kinds) if p != avoid])
    noun = rng.choice(_nouns_for(kinds))
    determiners, weights = _determiners(negative, counted)
    determiner = rng.choices(determiners, cum_weights=weights)[0]
    plural = rng.random() < _PLURAL_RATE[determiner]
    plain, colours = _adjectives_for(noun.kind)
    count = rng.choices((0, 1, 2), cum_weights=(55, 90, 100 if colours else 90))[0]
    adjectives = [rng.choice(plain + colours)] if count == 1 else []
    if count == 2:  # English puts the colour last: "the big red ball"
        adjectives = [rng.choice(plain), rng.choice(colours)]
    return NounPhrase(noun.english, determiner, plural, tuple(adjectives))


@functools.cache
def _prepositions_for(verb: str) -> list[lex.Preposition]:
    """The prepositions that read as a place or company after `verb`, so that their dative is
    right: "with" reads oddly after "be", and after verbs of motion "on"/"under"/"behind" would
    mean a direction ("jumps on the bed": "auf das Bett", accusative)."""
    if verb in ("go", "come", "fall", "jump", "throw"):
        return [lex.PREPOSITIONS["with"]]
    return [p for p in lex.PREPOSITIONS.values() if verb != "be" or p.english != "with"]


@functools.cache
def _pronouns_for(kinds: tuple[str, ...]) -> list[Pronoun]:
    """Every pronoun, but "it" only where animals or things may stand."""
    return [Pronoun(w) for w in lex.PRONOUNS if w != "it" or {"animal", "thing"} & set(kinds)]


@functools.cache
def _nouns_for(kinds: tuple[str, ...]) -> list[lex.Noun]:
    return [noun for noun in lex.NOUNS.values() if noun.kind in kinds]


@functools.cache
def _adjectives_for(kind: str) -> tuple[list[str], list[str]]:
    """The plain adjectives and the colours that suit nouns of `kind`."""
    fitting = [adjective for adjective in lex.ADJECTIVES.values() if kind in adjective.kinds]
    return [a.english for a in fitting if not a.colour], [a.english for a in fitting if a.colour]


@functools.cache
def _determiners(negative: bool, counted: bool) -> tuple[list[str], list[float]]:
    """Determiners and their cumulative weights, without "no" or numbers where they may not go."""
    allowed = {
        determiner: weight
        for determiner, weight in _DETERMINERS.items()
        if (negative or determiner != "no") and (counted or determiner not in lex.NUMBERS)
    }
    return list(allowed), list(itertools.accumulate(allowed.values()))

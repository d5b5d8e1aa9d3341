"""The toy grammar's sentence structure (`Sentence`, `Clause`, phrases) and how a sentence is
written in English and in German; the rules are described in `tfm.data.toy.generator`."""

from dataclasses import dataclass, replace
from typing import cast

from tfm.data.toy import lexicon as lex


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


def grammatical_person(phrase: Phrase) -> str:
    if isinstance(phrase, Pronoun):
        return lex.PRONOUNS[phrase.word].person
    return "3pl" if phrase.plural else "3sg"


def _english_clause(clause: Clause) -> list[str]:
    verb = lex.VERBS[clause.verb]
    person = grammatical_person(clause.subject)
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
        return [a_or_an(words[0]), *words]
    return [phrase.determiner, *words] if phrase.determiner else words


def a_or_an(next_word: str) -> str:
    return "an" if next_word[0] in "aeiou" else "a"  # no "an hour" or "a unicorn" in the lexicon


def _german_clause(clause: Clause, subordinate: bool) -> list[str]:
    verb = lex.VERBS[clause.verb]
    finite = verb.german_forms[grammatical_person(clause.subject)]
    kein = clause.negated and _indefinite(clause.object)
    middle = []  # what stands between the finite verb and the end of a main clause
    if clause.object:
        obj = replace(cast(NounPhrase, clause.object), determiner="no") if kein else clause.object
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

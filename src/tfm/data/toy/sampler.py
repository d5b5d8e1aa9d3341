"""Drawing random toy-grammar sentences (what `generate` needs)."""

import functools
import itertools
import random

from tfm.data.toy import lexicon as lex
from tfm.data.toy.grammar import Clause, NounPhrase, Phrase, PrepositionalPhrase, Pronoun, Sentence

# The weights keep every construction frequent: in 20,000 sentences each one appears hundreds of
# times (tests/data/toy/test_toy.py counts them).

_VALENCIES = {"intransitive": 3, "accusative": 4, "dative": 1, "copula": 2}
_DETERMINERS = {"the": 10, "a": 5, "no": 2, **dict.fromkeys(lex.NUMBERS, 0.25), "": 2}
_VERBS_BY_VALENCY = {
    valency: [verb for verb in lex.VERBS.values() if verb.valency == valency]
    for valency in [*_VALENCIES, "that"]
}
_PLURAL_RATE = {"the": 0.35, "no": 0.3, "a": 0.0, "": 1.0, **dict.fromkeys(lex.NUMBERS, 1.0)}


def draw_sentence(rng: random.Random) -> Sentence:
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

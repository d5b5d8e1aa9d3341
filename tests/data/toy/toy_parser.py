"""The toy corpus's reference translator, for its tests: an English toy-grammar sentence read back
into a `Sentence` (`parse`) and rendered in German (`translate`), which must give each generated
pair's German. Both ignore the case of their input and one final full stop."""

from typing import NoReturn

from tfm.data.toy import lexicon as lex
from tfm.data.toy.grammar import (
    Clause,
    NounPhrase,
    Phrase,
    PrepositionalPhrase,
    Pronoun,
    Sentence,
    a_or_an,
    grammatical_person,
    render_german,
)

_NOUN_FORMS = {n.english: (n.english, False) for n in lex.NOUNS.values()}
_NOUN_FORMS |= {n.english_plural: (n.english, True) for n in lex.NOUNS.values()}
_VERB_FORMS = {form: v.english for v in lex.VERBS.values() for form in v.english_forms.values()}
_SUBJECT_PRONOUNS = {p.english: p.english for p in lex.PRONOUNS.values()}
_OBJECT_PRONOUNS = {p.english_object: p.english for p in lex.PRONOUNS.values()}
_FUNCTION_WORDS = {"the", "a", "an", "no", "not", "do", "does", "that", "because"}
_KNOWN = {*_NOUN_FORMS, *_VERB_FORMS, *lex.VERBS, *lex.ADJECTIVES, *lex.NUMBERS, *lex.PREPOSITIONS}
_KNOWN |= {*_SUBJECT_PRONOUNS, *_OBJECT_PRONOUNS, *_FUNCTION_WORDS}


def translate(english: str) -> str:
    """The German translation of an English toy-grammar sentence.

    Raises ValueError naming the unknown word, or what was expected where the sentence leaves
    the grammar.
    """
    return render_german(parse(english))


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
        verb, negated = self.verb_group(grammatical_person(subject))
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
        if determiner in ("a", "an") and determiner != a_or_an(following[0]):
            self.error(f"{words!r} needs {a_or_an(following[0])!r}")
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

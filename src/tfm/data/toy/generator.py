"""A synthetic English→German corpus with real German grammar, so `tfm train` works offline.

    splits = generate(n_train=20000, n_validation=1000, n_test=1000, seed=0)
    splits["train"][0]  # an (English, German) pair

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
The same English sentence always has the same German one, so a perfect model exists.
"""

import itertools
import random

from tfm.data.toy.grammar import render_english, render_german
from tfm.data.toy.sampler import draw_sentence

MAX_WORDS = 14  # longer draws are redrawn, so a small model sees short sentences


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
        sentence = draw_sentence(rng)
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

"""The BPE vocabulary size a corpus gets when the config leaves `tokenizer.vocab_size` out.

A quarter of the corpus's word types (both sides), rounded to 500, at least twice its distinct
characters, in [1000, 32000]: small corpora learn best with small BPE vocabularies (Sennrich &
Zhang, 2019). The data cache applies it before it learns BPE; the recipe shows it as the rule of
`tokenizer.vocab_size`.
"""

from __future__ import annotations

from tfm.data.corpus_figures import TextFigures


def vocabulary_for(figures: TextFigures) -> tuple[int, str]:
    """The vocabulary size for a corpus of `figures`, and the rule written with its figures."""
    types, chars = figures.types, figures.distinct_chars
    quarter = round(types / 4 / 500) * 500
    size = int(min(max(quarter, 2 * chars, 1000), 32000))
    rule = (
        f"a quarter of {types:,} word types ({quarter:,}), at least twice the {chars:,} "
        "characters, in [1,000, 32,000]"
    )
    return size, rule

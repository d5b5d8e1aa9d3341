"""The built-in toy corpus: `generator` makes the English→German splits that `tfm train` uses
offline, from the `grammar` of one clause and its subordinate clauses, the `lexicon` of words and
their German forms, and the `sampler` that draws sentences from them."""

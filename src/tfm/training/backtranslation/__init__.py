"""Back-translation (Sennrich et al., 2016): a run with monolingual text in the target language
trains a model of the reverse direction, translates the text with it into synthetic sources, and
trains the pair on its own pairs and the synthetic ones, inside one time budget (`phases.py`;
the plan in `budget.py`, the synthetic corpus in `synthetic.py`)."""

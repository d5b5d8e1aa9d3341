"""What makes a reverse model useful for reranking, measured on aligned texts (shared by the tests
of a reverse run and of a run trained both ways)."""

from collections.abc import Sequence

from tfm.prediction.reranking import Reranker


def dropped_word_wins(
    reranker: Reranker, sources: Sequence[str], references: Sequence[str]
) -> tuple[int, int]:
    """(wins, trials): each reference against itself with one word left out, a win when the
    full reference explains its source better (a higher channel score)."""
    wins = trials = 0
    for source, reference in zip(sources, references, strict=True):
        words = reference.split()
        shorter = [" ".join(words[:i] + words[i + 1 :]) for i in range(len(words))]
        full, *dropped = reranker.channel_scores([source] * (1 + len(words)), [reference, *shorter])
        wins += sum(full > score for score in dropped)
        trials += len(dropped)
    return wins, trials
